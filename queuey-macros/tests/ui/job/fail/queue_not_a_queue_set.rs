// The path must lead to a `#[derive(Queues)]` enum (the compiler's own error).
#[derive(Debug, Clone, Copy)]
enum NotQueues {
    Emails,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = NotQueues::Emails)]
struct SendEmail;

fn main() {}
