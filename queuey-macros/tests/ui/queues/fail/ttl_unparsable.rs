// Not a duration at all.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "soon")]
    Emails,
    Other,
}

fn main() {}
