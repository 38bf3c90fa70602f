// max_attempts is a u32.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max_attempts = 4294967296))]
    Emails,
    Other,
}

fn main() {}
