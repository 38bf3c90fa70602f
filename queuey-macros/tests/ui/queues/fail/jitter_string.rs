// A string where a bool is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(jitter = "off"))]
    Emails,
    Other,
}

fn main() {}
