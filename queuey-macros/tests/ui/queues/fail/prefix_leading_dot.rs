// A prefix starting with a dot.
#[derive(queuey_core::Queues)]
#[queues(prefix = ".myapp")]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
