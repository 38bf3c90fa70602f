// Fractions are not supported.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "1.5s")]
    Emails,
    Other,
}

fn main() {}
