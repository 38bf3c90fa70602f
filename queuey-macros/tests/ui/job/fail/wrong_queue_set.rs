// A producer of one queue set does not accept a job of another set.
use queuey_core::{memory::MemoryBackend, Job, Producer, Queues};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum OtherQueues {
    Reports,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails)]
struct SendEmail {
    to: String,
}

#[allow(dead_code)]
async fn enqueue(producer: Producer<OtherQueues, MemoryBackend>) {
    let _ = producer.enqueue(&SendEmail { to: "a@example.com".into() }).await;
}

fn main() {}
