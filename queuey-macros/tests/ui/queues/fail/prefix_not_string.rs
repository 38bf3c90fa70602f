// `prefix` wants a string literal.
#[derive(queuey_core::Queues)]
#[queues(prefix = myapp)]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
