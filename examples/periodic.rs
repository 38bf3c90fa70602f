//! Periodic jobs: a heartbeat every second and a nightly report at 03:00
//! Amsterdam time, declared next to the worker that runs them.
//!
//! ```sh
//! cargo run --example periodic --features rabbitmq  # in memory, no broker
//! AMQP_URL=amqp://guest:guest@localhost:5672/%2f cargo run --example periodic --features rabbitmq
//! ```
//!
//! It runs for four seconds and prints each heartbeat job it runs, with the
//! tick it is for and its id (the same in every process). On RabbitMQ, run
//! it in two terminals at once: each tick still runs once, enqueued by
//! whichever process leads the schedule; stop the leader and the other
//! takes over. It leaves the queue `periodic-example.maintenance` (and its
//! `.dead`) and one schedule queue per periodic job,
//! `periodic-example.maintenance.periodic.{name}`, which remember the last
//! tick fired.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuey::backend::Backend;
use queuey::periodic::{Leadership, Missed, Periodic, Schedule};
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "periodic-example")]
enum AppQueues {
    Maintenance,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Maintenance, name = "heartbeat")]
struct Heartbeat {
    tick_ms: u64,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Maintenance, name = "nightly_report")]
struct NightlyReport;

struct Handlers;

impl JobHandler for Handlers {
    type Job = Heartbeat;

    async fn handle(&self, job: Heartbeat, ctx: JobContext) -> Result<(), JobError> {
        let late = now_ms().saturating_sub(job.tick_ms);
        println!(
            "heartbeat for tick {} ms, run {late} ms after it, job id {}",
            job.tick_ms,
            ctx.job_id()
        );
        Ok(())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

async fn run<B>(backend: B) -> Result<(), Box<dyn std::error::Error>>
where
    B: Backend + Leadership + Clone,
{
    let nightly = Schedule::cron("0 0 3 * * *", "Europe/Amsterdam")?;
    if let Some(next) = nightly.next_after(SystemTime::now()) {
        let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
        println!("the nightly report is due in {} min", wait.as_secs() / 60);
    }
    let worker = Worker::<AppQueues, _>::builder(backend)
        .handler(Handlers)
        .handler(handler_fn(|_: NightlyReport, _: JobContext| async {
            println!("nightly report");
            Ok::<_, JobError>(())
        }))
        .periodic(
            Periodic::for_tick(
                "heartbeat",
                Schedule::every(Duration::from_secs(1))?,
                |tick| Heartbeat {
                    tick_ms: tick
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64),
                },
            )
            // A heartbeat nobody sent in time is not worth sending late.
            .missed(Missed::Skip),
        )
        // A night missed (every process was down at 03:00) is reported
        // once, as soon as one is back.
        .periodic(
            Periodic::new("nightly-report", nightly, || NightlyReport).missed(Missed::FireOnce),
        )
        .build()
        .await?;
    // The main loop: until Ctrl-C or SIGTERM, and, in this example, for
    // four seconds.
    let stop = async {
        tokio::select! {
            () = queuey::shutdown_signal() => {}
            () = tokio::time::sleep(Duration::from_secs(4)) => {}
        }
    };
    worker.run_until(stop).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("AMQP_URL") {
        Ok(url) if !url.is_empty() => {
            println!("on RabbitMQ");
            let options = RabbitMqOptions::default().connection_name("queuey-example-periodic");
            let backend = RabbitMqBackend::with_options(url.as_str(), options).await?;
            run(backend.clone()).await?;
            backend.close().await?;
        }
        _ => {
            println!("in memory (set AMQP_URL to run it on RabbitMQ)");
            run(std::sync::Arc::new(MemoryBackend::new())).await?;
        }
    }
    Ok(())
}
