// A factor below 1 would shrink the wait.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(factor = 0.5))]
    Emails,
    Other,
}

fn main() {}
