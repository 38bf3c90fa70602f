// A bool where an integer is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(max_priority = true)]
    Emails,
    Other,
}

fn main() {}
