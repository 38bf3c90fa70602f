// Whitespace inside a queue name.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(name = "send emails")]
    Emails,
    Other,
}

fn main() {}
