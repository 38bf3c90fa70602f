// A duration string without a unit.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "30")]
    Emails,
    Other,
}

fn main() {}
