// An unknown backoff kind.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "linear"))]
    Emails,
    Other,
}

fn main() {}
