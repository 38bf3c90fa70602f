// A key repeated in a second `#[queue]` on the same variant.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(durable = true)]
    #[queue(durable = false)]
    Emails,
    Other,
}

fn main() {}
