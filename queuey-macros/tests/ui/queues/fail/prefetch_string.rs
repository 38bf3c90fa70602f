// A string where an integer is expected.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = "32")]
    Emails,
    Other,
}

fn main() {}
