// `prefetch` takes a value, not a block.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch(3))]
    Emails,
    Other,
}

fn main() {}
