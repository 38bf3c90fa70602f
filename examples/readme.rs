//! An e-mail job on RabbitMQ, deferred once and retried once, until Ctrl-C or SIGTERM.

use std::{sync::Arc, time::Duration};

use queuey::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "app")]
enum AppQueues {
    #[queue(retry(max_attempts = 5, base = "1s", max = "5m"))] // backoff waits on the broker
    Emails,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails, name = "send_email")]
struct SendEmail {
    to: String,
}

async fn send(job: SendEmail, ctx: JobContext) -> Result<(), JobError> {
    println!("to {}: attempt {}", job.to, ctx.attempt());
    match (ctx.deferrals(), ctx.attempt()) {
        (0, _) => {
            println!("  rate limited: back in 30 s, no attempt spent (Ctrl-C stops the worker)");
            Err(JobError::deferred(Duration::from_secs(30))) // a 429
        }
        (_, 1) => {
            println!("  mail server busy: attempt 2 in about 1 s");
            Err(JobError::retryable("mail server busy"))
        }
        _ => {
            println!("  sent; the worker waits for more jobs until Ctrl-C");
            Ok(())
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AMQP_URL").unwrap_or("amqp://guest:guest@localhost:5672/%2f".into());
    let backend = Arc::new(RabbitMqBackend::connect(url.as_str()).await?);
    let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    let to = "ada@example.com".to_owned();
    producer.enqueue(&SendEmail { to }).await?;

    let worker = Worker::<AppQueues, _>::builder(backend)
        .handler(handler_fn(send))
        .build()
        .await?;
    // Until Ctrl-C or SIGTERM; jobs already running finish and settle first.
    worker.run_until(queuey::shutdown_signal()).await?;
    Ok(())
}
