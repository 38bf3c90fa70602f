// A zero base delay.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(base = "0s"))]
    Emails,
    Other,
}

fn main() {}
