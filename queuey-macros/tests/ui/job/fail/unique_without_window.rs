// A unique job must say how long it holds its key.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Emails, unique(key = Self::to))]
struct SendEmail {
    to: String,
}

fn main() {}
