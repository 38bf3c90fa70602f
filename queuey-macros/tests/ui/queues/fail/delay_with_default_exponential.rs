// `delay` belongs to fixed backoff.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(delay = "10s"))]
    Emails,
    Other,
}

fn main() {}
