// A zero TTL.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "0s")]
    Emails,
    Other,
}

fn main() {}
