// A key in a block without its value.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max_attempts = ))]
    Emails,
    Other,
}

fn main() {}
