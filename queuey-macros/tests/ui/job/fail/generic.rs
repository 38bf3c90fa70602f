// Job types cannot be generic.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails)]
struct Wrapper<T> {
    inner: T,
}

fn main() {}
