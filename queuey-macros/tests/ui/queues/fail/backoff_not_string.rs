// The backoff kind is a string.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = exponential))]
    Emails,
    Other,
}

fn main() {}
