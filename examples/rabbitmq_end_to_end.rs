//! A producer and a worker on a real RabbitMQ:
//!
//! ```sh
//! cargo run --example rabbitmq_end_to_end --features rabbitmq
//! ```
//!
//! It reads `AMQP_URL` (default `amqp://guest:guest@localhost:5672/%2f`).
//! Watch the broker's queue list while it runs: `aq-example.emails` and
//! `aq-example.emails.dead` appear at startup and stay. The flaky job fails
//! twice; its retries wait 500 ms and then 1 s, in the hold queues
//! `aq-example.emails.deferred.quorum.500` and `…quorum.1000`, durable quorum
//! queues (`queuey holds` lists them). A running backend deletes the holds it
//! has not used for an hour; this example, done with its jobs, prunes its
//! two at once before it exits, which takes ten seconds (each hold is
//! watched that long first, so that no job is ever deleted with it). A job
//! with an invalid address goes to `aq-example.emails.dead`, where it stays
//! for an operator to read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuey::JobHandler;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use serde::{Deserialize, Serialize};

const DEFAULT_URL: &str = "amqp://guest:guest@localhost:5672/%2f";

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "aq-example")]
enum AppQueues {
    /// Three attempts; the waits double from 500 ms (500 ms, then 1 s).
    #[queue(retry(
        max_attempts = 3,
        backoff = "exponential",
        base = "500ms",
        factor = 2,
        max = "10s",
        jitter = false
    ))]
    Emails,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails, name = "send_email")]
struct SendEmail {
    to: String,
    /// Attempts that fail before the mail server accepts the message.
    flaky_attempts: u32,
}

struct EmailHandler {
    started: Instant,
}

impl JobHandler for EmailHandler {
    type Job = SendEmail;

    async fn handle(&self, job: SendEmail, ctx: JobContext) -> Result<(), JobError> {
        let at = self.started.elapsed().as_millis();
        if !job.to.contains('@') {
            println!("{at:>5} ms  {}: not an address, dead-lettering", job.to);
            return Err(JobError::fatal(format!(
                "{:?} is not an e-mail address",
                job.to
            )));
        }
        if ctx.attempt() <= job.flaky_attempts {
            println!("{at:>5} ms  {}: attempt {} failed", job.to, ctx.attempt());
            return Err(JobError::retryable("421 mail server busy"));
        }
        println!("{at:>5} ms  {}: sent on attempt {}", job.to, ctx.attempt());
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let url = std::env::var("AMQP_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    // The backend never prints the password; the URL is only logged redacted.
    let options = RabbitMqOptions::default()
        .connection_name("queuey-example-end-to-end")
        // Round retry waits to 100 ms, so 500 ms stays 500 ms.
        .retry_granularity(Duration::from_millis(100));
    let backend = Arc::new(RabbitMqBackend::with_options(&url, options).await?);
    tracing::info!(backend = ?backend, "connected");

    let started = Instant::now();
    // One backend (one connection) shared by the producer and the worker.
    let worker = Worker::<AppQueues, _>::builder(backend.clone())
        .handler(EmailHandler { started })
        .build()
        .await?;
    let handle = worker.handle();

    let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    producer
        .enqueue(&SendEmail {
            to: "ada@example.com".into(),
            flaky_attempts: 2,
        })
        .await?;
    producer
        .enqueue(&SendEmail {
            to: "nobody".into(),
            flaky_attempts: 0,
        })
        .await?;

    // Two jobs: the flaky one (three deliveries) and the invalid one.
    // The main loop: until Ctrl-C or SIGTERM, and, in this example, until
    // the jobs are done. On either signal, jobs already running finish and
    // settle first; the rest stay on the broker.
    let all_done = {
        let handle = handle.clone();
        async move {
            while handle.jobs_finished() < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let stop = async {
        tokio::select! {
            () = queuey::shutdown_signal() => {}
            () = all_done => {}
        }
    };
    tokio::time::timeout(Duration::from_secs(30), worker.run_until(stop))
        .await
        .map_err(|_| "the jobs did not finish within 30 s")??;

    // The holds of the two retries, pruned together: each is deleted only
    // if no job waits in it (the management API is asked too) and none
    // reaches it while it is watched.
    let queue = AppQueues::Emails.name();
    let holds = [500, 1000].map(|ms| format!("{queue}.deferred.quorum.{ms}"));
    let pruned =
        futures::future::join_all(holds.iter().map(|hold| backend.prune_hold(queue, hold))).await;
    for (hold, outcome) in holds.iter().zip(pruned) {
        println!("{hold}: {:?}", outcome?);
    }
    backend.close().await?;
    println!(
        "done in {} ms; the invalid job waits in {}.dead",
        started.elapsed().as_millis(),
        AppQueues::Emails.name()
    );
    Ok(())
}
