// An unknown key names the keys that exist.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails, retries(max_attempts = 3))]
struct SendEmail;

fn main() {}
