// base larger than max.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(base = "10s", max = "5s"))]
    Emails,
    Other,
}

fn main() {}
