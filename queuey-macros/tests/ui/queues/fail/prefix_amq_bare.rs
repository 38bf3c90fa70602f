// The prefix `amq` makes every name start with `amq.`.
#[derive(queuey_core::Queues)]
#[queues(prefix = "amq")]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
