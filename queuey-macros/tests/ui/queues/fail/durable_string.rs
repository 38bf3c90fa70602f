// A string where a bool is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(durable = "yes")]
    Emails,
    Other,
}

fn main() {}
