// `queue` takes a value, not a block.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue(AppQueues::Emails))]
struct SendEmail;

fn main() {}
