// An empty prefix.
#[derive(queuey_core::Queues)]
#[queues(prefix = "")]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
