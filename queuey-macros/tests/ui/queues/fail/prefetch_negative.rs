// A negative prefetch.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = -1)]
    Emails,
    Other,
}

fn main() {}
