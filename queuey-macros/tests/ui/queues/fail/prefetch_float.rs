// A float where an integer is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = 1.5)]
    Emails,
    Other,
}

fn main() {}
