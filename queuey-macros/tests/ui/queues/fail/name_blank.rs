// A queue name of whitespace only.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(name = "   ")]
    Emails,
    Other,
}

fn main() {}
