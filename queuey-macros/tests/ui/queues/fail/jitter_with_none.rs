// No-wait backoff takes no other keys.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(backoff = "none", jitter = false))]
    Emails,
    Other,
}

fn main() {}
