// A negative factor.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(factor = -2))]
    Emails,
    Other,
}

fn main() {}
