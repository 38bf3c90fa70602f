// A string where a number is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(factor = "2"))]
    Emails,
    Other,
}

fn main() {}
