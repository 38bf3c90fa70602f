// An empty job name.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails, name = "")]
struct SendEmail;

fn main() {}
