// A key `unique(..)` does not know.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Emails, unique(window = "10m", ttl = "1h"))]
struct SendEmail {
    to: String,
}

fn main() {}
