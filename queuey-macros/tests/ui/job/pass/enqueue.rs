// A producer of the job's own queue set accepts it.
use queuey_core::{Job, Producer, Queues};
use queuey_core::memory::MemoryBackend;
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails)]
struct SendEmail {
    to: String,
}

#[allow(dead_code)]
async fn enqueue(producer: Producer<AppQueues, MemoryBackend>) -> Result<(), queuey_core::Error> {
    producer.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
    Ok(())
}

fn main() {}
