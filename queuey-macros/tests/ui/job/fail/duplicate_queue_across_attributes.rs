// `queue` in two `#[job]` attributes.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails)]
#[job(queue = AppQueues::Emails)]
struct SendEmail;

fn main() {}
