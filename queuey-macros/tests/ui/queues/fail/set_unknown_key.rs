// `#[queues]` knows only `prefix`.
#[derive(queuey_core::Queues)]
#[queues(prefix = "app", durable = true)]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
