// A zero fixed delay.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "fixed", delay = "0ms"))]
    Emails,
    Other,
}

fn main() {}
