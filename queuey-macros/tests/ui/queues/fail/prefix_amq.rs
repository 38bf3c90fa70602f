// A prefix starting with `amq.`.
#[derive(queuey_core::Queues)]
#[queues(prefix = "amq.app")]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
