// max smaller than the default base of 1s.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(retry(max = "500ms"))]
    Emails,
    Other,
}

fn main() {}
