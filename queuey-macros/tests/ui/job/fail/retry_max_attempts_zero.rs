// Job retry blocks follow the same rules as queue ones.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails, retry(max_attempts = 0))]
struct SendEmail;

fn main() {}
