// `retry` takes a block.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry = 3)]
    Emails,
    Other,
}

fn main() {}
