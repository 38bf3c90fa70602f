//! One worker process of the fleet: consumes both queues of the namespace
//! it is given and reports on its standard output what it does, until its
//! standard input closes.
//!
//! Lines: `STARTED queue n id`, `HANDLED queue n id`, `SIGNALLED id`,
//! `PAUSED queue`, `RESUMED queue`, `READY`.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::time::Duration;

use queuey::handler_fn;
use queuey::prelude::*;
use queuey::queue::Namespace;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use serde::{Deserialize, Serialize};

/// The variable that makes this binary a fleet process: the namespace.
pub(crate) const CHILD_ENV: &str = "QUEUEY_CONTROL_CHILD";
/// The control stream the fleet shares.
pub(crate) const STREAM_ENV: &str = "QUEUEY_CONTROL_STREAM";

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "fctl")]
pub(crate) enum FleetQueues {
    #[queue(prefetch = 10)]
    A,
    #[queue(prefetch = 10)]
    B,
}

/// A job of queue A; `hold_ms` long, or until cancelled when `until_cancelled`.
#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = FleetQueues::A, name = "a")]
pub(crate) struct JobA {
    pub(crate) n: u32,
    pub(crate) work_ms: u64,
    #[serde(default)]
    pub(crate) until_cancelled: bool,
}

#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = FleetQueues::B, name = "b")]
pub(crate) struct JobB {
    pub(crate) n: u32,
    pub(crate) work_ms: u64,
}

pub(crate) fn options(connection: String) -> RabbitMqOptions {
    let mut options = RabbitMqOptions::default().connection_name(connection);
    if let Ok(stream) = std::env::var(STREAM_ENV) {
        options = options.control_stream(stream);
    }
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process() {
    let Ok(namespace) = std::env::var(CHILD_ENV) else {
        return;
    };
    let url = std::env::var("AMQP_URL").expect("AMQP_URL");
    let pid = std::process::id();
    let backend = RabbitMqBackend::with_options(
        url.as_str(),
        options(format!("queuey-test-control-{namespace}-{pid}")),
    )
    .await
    .expect("connects");
    let a = handler_fn(|job: JobA, ctx: JobContext| async move {
        println!("STARTED a {} {}", job.n, ctx.job_id());
        if job.until_cancelled {
            ctx.cancel_signal().cancelled().await;
            println!("SIGNALLED {}", ctx.job_id());
            return Err(JobError::fatal("stopped: cancelled"));
        }
        tokio::time::sleep(Duration::from_millis(job.work_ms)).await;
        println!("HANDLED a {} {}", job.n, ctx.job_id());
        Ok(())
    });
    let b = handler_fn(|job: JobB, ctx: JobContext| async move {
        println!("STARTED b {} {}", job.n, ctx.job_id());
        tokio::time::sleep(Duration::from_millis(job.work_ms)).await;
        println!("HANDLED b {} {}", job.n, ctx.job_id());
        Ok::<(), JobError>(())
    });
    let worker = Worker::<FleetQueues, _>::builder(backend.clone())
        .handler(a)
        .handler(b)
        .namespace(Namespace::new(namespace).unwrap())
        .concurrency(4)
        .heartbeat_interval(Duration::from_secs(1))
        .build()
        .await
        .expect("the worker builds");
    let handle = worker.handle();
    let watched = handle.clone();
    // Reports every change of the paused queues.
    tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        loop {
            let now: BTreeSet<String> = watched.paused_queues().into_iter().collect();
            for q in now.difference(&seen) {
                println!("PAUSED {q}");
            }
            for q in seen.difference(&now) {
                println!("RESUMED {q}");
            }
            seen = now;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let stopping = handle.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
        stopping.shutdown();
    });
    println!("READY");
    worker.run().await.expect("the worker runs");
    let _ = backend.close().await;
    std::process::exit(0);
}
