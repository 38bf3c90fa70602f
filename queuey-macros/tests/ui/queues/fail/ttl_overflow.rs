// A duration that does not fit in 64 bits of milliseconds.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "99999999999999999999d")]
    Emails,
    Other,
}

fn main() {}
