// Entries are separated by commas.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = 1 durable = true)]
    Emails,
    Other,
}

fn main() {}
