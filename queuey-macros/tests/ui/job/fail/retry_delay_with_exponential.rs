// A fixed-backoff key under exponential backoff.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails, retry(backoff = "exponential", delay = "1s"))]
struct SendEmail;

fn main() {}
