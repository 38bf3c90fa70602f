// An unknown unit.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "2w")]
    Emails,
    Other,
}

fn main() {}
