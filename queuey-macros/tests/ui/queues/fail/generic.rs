// A queue set cannot be generic.
#[derive(queuey_core::Queues)]
enum AppQueues<T> {
    Emails,
    Other(std::marker::PhantomData<T>),
}

fn main() {}
