// A backoff cap longer than a hold accepts (24 days).
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max = "25d"))]
    Emails,
}

fn main() {}
