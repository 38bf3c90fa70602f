// `base` belongs to exponential backoff.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "fixed", delay = "1s", base = "1s"))]
    Emails,
    Other,
}

fn main() {}
