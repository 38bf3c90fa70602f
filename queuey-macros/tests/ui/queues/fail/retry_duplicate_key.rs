// A key given twice in `retry(..)`.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max_attempts = 3, max_attempts = 4))]
    Emails,
    Other,
}

fn main() {}
