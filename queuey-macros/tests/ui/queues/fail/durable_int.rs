// An integer where a bool is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(durable = 1)]
    Emails,
    Other,
}

fn main() {}
