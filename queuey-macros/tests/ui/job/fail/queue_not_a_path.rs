// `queue` is a path.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = 1)]
struct SendEmail;

fn main() {}
