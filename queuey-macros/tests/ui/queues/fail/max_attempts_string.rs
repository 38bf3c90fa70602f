// A string where an integer is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max_attempts = "3"))]
    Emails,
    Other,
}

fn main() {}
