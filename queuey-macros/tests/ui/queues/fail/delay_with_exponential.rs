// `delay` with an explicit exponential backoff.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "exponential", delay = "10s"))]
    Emails,
    Other,
}

fn main() {}
