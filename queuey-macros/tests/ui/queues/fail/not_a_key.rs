// Each entry starts with a key.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue("name" = "emails")]
    Emails,
    Other,
}

fn main() {}
