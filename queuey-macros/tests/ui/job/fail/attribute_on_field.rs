// `#[job]` on a field would be ignored, so it is refused.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails)]
struct SendEmail {
    #[job(name = "to")]
    to: String,
}

fn main() {}
