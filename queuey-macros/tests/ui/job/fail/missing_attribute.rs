// A job without `#[job(..)]` has no queue.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
struct SendEmail;

fn main() {}
