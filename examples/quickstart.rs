//! queuey in one file, on the in-memory backend (no broker needed):
//!
//! ```sh
//! cargo run --example quickstart
//! ```
//!
//! Four jobs: one succeeds at once, one fails twice and succeeds on its
//! third attempt, one hits a rate limit (`429` with `Retry-After`) and is
//! deferred without spending an attempt, and one is invalid and goes to the
//! dead-letter store. The program prints what happens to each and exits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuey::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "quickstart")]
enum AppQueues {
    /// Emails: three attempts, 200 ms apart.
    #[queue(retry(max_attempts = 3, backoff = "fixed", delay = "200ms"))]
    Emails,
    /// Webhooks: the default policy.
    Webhooks,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails, name = "send_email")]
struct SendEmail {
    to: String,
    /// How many attempts fail before the mail server accepts the message.
    flaky_attempts: u32,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Webhooks, name = "call_webhook")]
struct CallWebhook {
    url: String,
}

struct EmailHandler {
    started: Instant,
}

impl JobHandler for EmailHandler {
    type Job = SendEmail;

    async fn handle(&self, job: SendEmail, ctx: JobContext) -> Result<(), JobError> {
        let at = self.started.elapsed().as_millis();
        if !job.to.contains('@') {
            println!(
                "{at:>5} ms  email to {:?}: not an address, giving up",
                job.to
            );
            return Err(JobError::fatal(format!(
                "{:?} is not an e-mail address",
                job.to
            )));
        }
        if ctx.attempt() <= job.flaky_attempts {
            println!(
                "{at:>5} ms  email to {}: attempt {} of {} failed (server busy)",
                job.to,
                ctx.attempt(),
                ctx.max_attempts()
            );
            return Err(JobError::retryable("421 service not available, try later"));
        }
        println!(
            "{at:>5} ms  email to {}: sent on attempt {}",
            job.to,
            ctx.attempt()
        );
        Ok(())
    }
}

struct WebhookHandler {
    started: Instant,
}

impl JobHandler for WebhookHandler {
    type Job = CallWebhook;

    async fn handle(&self, job: CallWebhook, ctx: JobContext) -> Result<(), JobError> {
        let at = self.started.elapsed().as_millis();
        if ctx.deferrals() == 0 {
            println!(
                "{at:>5} ms  webhook {}: 429 Too Many Requests, Retry-After 300 ms",
                job.url
            );
            return Err(JobError::deferred_msg(
                Duration::from_millis(300),
                "429 Too Many Requests",
            ));
        }
        println!(
            "{at:>5} ms  webhook {}: delivered (attempt {}, after {} deferral)",
            job.url,
            ctx.attempt(),
            ctx.deferrals()
        );
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let backend = Arc::new(MemoryBackend::new());

    // The default stack (tracing, metrics, dead-letter, deadline, retry,
    // deferral, a per-attempt timeout) wraps both handlers;
    // `.handler_with(handler, layers)` would add layers of yours inside it.
    let worker = Worker::<AppQueues, _>::builder(backend.clone())
        .handler(EmailHandler { started })
        .handler(WebhookHandler { started })
        .build()
        .await?;
    let handle = worker.handle();

    let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    producer
        .enqueue(&SendEmail {
            to: "ada@example.com".into(),
            flaky_attempts: 0,
        })
        .await?;
    producer
        .enqueue(&SendEmail {
            to: "grace@example.com".into(),
            flaky_attempts: 2,
        })
        .await?;
    producer
        .enqueue(&CallWebhook {
            url: "https://example.com/hooks/order".into(),
        })
        .await?;
    producer
        .enqueue(&SendEmail {
            to: "nobody".into(),
            flaky_attempts: 0,
        })
        .await?;

    // The main loop: the worker runs until Ctrl-C or SIGTERM, and, in this
    // example, until its four jobs are done. A retry or a deferral comes
    // back as a new delivery, so the four take 1 + 3 + 2 + 1 = 7
    // deliveries. On either signal, jobs already running finish and settle
    // first; the rest stay on the queue.
    let all_done = {
        let handle = handle.clone();
        async move {
            while handle.jobs_finished() < 4 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let stop = async {
        tokio::select! {
            () = queuey::shutdown_signal() => {}
            () = all_done => {}
        }
    };
    tokio::time::timeout(Duration::from_secs(10), worker.run_until(stop))
        .await
        .map_err(|_| "the jobs did not finish within 10 s")??;

    println!();
    for queue in [AppQueues::Emails, AppQueues::Webhooks] {
        for dead in backend.dead_letters(queue.name()) {
            println!(
                "dead letter on {}: {} (after {} attempt)",
                dead.original_queue, dead.reason, dead.attempts
            );
        }
    }
    println!(
        "{} jobs finished in {} deliveries (each retry or deferral is a delivery of its own), \
         {} failed to settle, {} ms",
        handle.jobs_finished(),
        handle.jobs_settled(),
        handle.settle_failures(),
        started.elapsed().as_millis()
    );
    Ok(())
}
