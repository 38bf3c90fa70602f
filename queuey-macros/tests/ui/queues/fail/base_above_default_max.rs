// base larger than the default max of 5m.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(base = "10m"))]
    Emails,
    Other,
}

fn main() {}
