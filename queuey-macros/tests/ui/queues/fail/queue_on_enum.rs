// `#[queue]` belongs on variants.
#[derive(queuey_core::Queues)]
#[queue(prefetch = 3)]
enum AppQueues {
    Emails,
}

fn main() {}
