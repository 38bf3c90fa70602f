// Mistakes in different variants are all reported at once.
#[derive(queuey_core::Queues)]
enum AppQueues {
    Emails,
    #[queue(prefetch = 0)]
    Webhooks,
    #[queue(message_ttl = "0s")]
    Reports,
    #[queue(name = "emails")]
    Duplicate,
}

fn main() {}
