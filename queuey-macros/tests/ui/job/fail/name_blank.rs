// A job name of whitespace only.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails, name = " \t ")]
struct SendEmail;

fn main() {}
