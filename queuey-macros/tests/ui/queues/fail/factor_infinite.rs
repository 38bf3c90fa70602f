// A float literal too large to be finite.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(factor = 1e999))]
    Emails,
    Other,
}

fn main() {}
