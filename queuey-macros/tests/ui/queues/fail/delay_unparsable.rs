// An unparsable fixed delay.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "fixed", delay = "ten seconds"))]
    Emails,
    Other,
}

fn main() {}
