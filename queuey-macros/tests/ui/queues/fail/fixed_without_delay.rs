// Fixed backoff has no default delay.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "fixed", max_attempts = 3))]
    Emails,
    Other,
}

fn main() {}
