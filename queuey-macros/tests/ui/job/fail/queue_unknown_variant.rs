// The variant must exist in the set (the compiler's own error).
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Mail)]
#[derive(serde::Serialize, serde::Deserialize)]
struct SendEmail;

fn main() {}
