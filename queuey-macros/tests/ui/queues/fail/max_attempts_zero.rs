// The first attempt counts: at least 1.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max_attempts = 0))]
    Emails,
    Other,
}

fn main() {}
