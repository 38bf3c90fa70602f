// A fixed backoff longer than a hold accepts (24 days).
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "fixed", delay = "30d"))]
    Emails,
}

fn main() {}
