// An unknown key in `retry(..)`.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(attempts = 3))]
    Emails,
    Other,
}

fn main() {}
