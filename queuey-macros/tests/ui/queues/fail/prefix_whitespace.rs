// Whitespace in the prefix.
#[derive(queuey_core::Queues)]
#[queues(prefix = "my app")]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
