// A bare key is not a flag.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(durable)]
    Emails,
    Other,
}

fn main() {}
