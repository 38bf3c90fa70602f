// A unique window over 365 days is refused when the program is compiled.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Emails, unique(window = "366d"))]
struct SendEmail;

fn main() {}
