// An empty `#[job()]` has no queue either.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job()]
struct SendEmail;

fn main() {}
