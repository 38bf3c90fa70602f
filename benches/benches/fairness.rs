//! Fairness between tenants across a fleet of worker processes on one
//! sharded queue of the shared broker, in one run.
//!
//! ```sh
//! cargo bench -p queuey-bench --bench fairness
//! QUEUEY_BENCH_FLOOD=5000 QUEUEY_BENCH_TRIALS=10 QUEUEY_BENCH_WINDOW_SECS=5 \
//!     QUEUEY_BENCH_ALONE_SECS=3 cargo bench -p queuey-bench --bench fairness
//! ```
//!
//! The parent declares a fresh classic queue `queuey-bench-fair.{uuid}`
//! with 16 shards, and starts 4 worker processes (this binary again, with
//! `QUEUEY_BENCH_FAIR_CHILD` set), each a `Worker` with 8 job slots, the
//! default stack and the same tenant weights, whose handler sleeps 10 ms.
//! The queue's prefetch gives each shard consumer of a worker 4 × its slots
//! (17 consumers: 16 shards and the lane): a heavy tenant's shard can fill
//! every slot of its worker and still have as many jobs again at hand, so
//! it never runs dry between two broker round trips and turns always have
//! every busy tenant to choose from. The workers report each job start on
//! their stdout, counted per second of the wall clock they share with the
//! parent, and stop when the parent closes their stdin.
//!
//! - **Flood isolation**: one tenant enqueues 100,000 jobs
//!   (`Producer::enqueue_batch`), then the workers start. While that
//!   backlog waits, each trial enqueues one job of a tenant on another
//!   shard, stamped with its enqueue time; the worker that starts it
//!   reports the wait. p50, p99 and max over the trials, and the flood's
//!   backlog at the first and the last trial.
//! - **Shares by weight**: three tenants, weights 3, 1 and 1, each on a
//!   shard of its own, their backlogs kept topped up by the parent; each
//!   tenant's share of the starts in a window (target 60/20/20) and the
//!   fleet's starts per second. Then the heavy tenant alone for a shorter
//!   window: its share (100 %) and the fleet's starts per second beside the
//!   shared window's (the turns are work-conserving).
//!
//! Every queue the run made (lane, shards, their dead-letter and suspect
//! queues, the run's control streams) is deleted at the end, also on an
//! error or Ctrl-C, and `rabbitmqctl` (when it reaches the broker) checks
//! that none is left.
//!
//! Environment:
//!
//! | variable | default |
//! |---|---|
//! | `AMQP_URL` | `amqp://guest:guest@127.0.0.1:5672/%2f` |
//! | `QUEUEY_BENCH_WORKERS` | 4 worker processes |
//! | `QUEUEY_BENCH_SLOTS` | 8 job slots per worker |
//! | `QUEUEY_BENCH_FAIR_SHARDS` | 16 shards (at least 5: one per tenant) |
//! | `QUEUEY_BENCH_JOB_MS` | 10 ms per job (a tokio sleep) |
//! | `QUEUEY_BENCH_FLOOD` | 100000 jobs of the flood |
//! | `QUEUEY_BENCH_TRIALS` | 100 trials |
//! | `QUEUEY_BENCH_TRIAL_MS` | 150 ms between trials |
//! | `QUEUEY_BENCH_WINDOW_SECS` | 60 s of shared window |
//! | `QUEUEY_BENCH_ALONE_SECS` | 20 s of the heavy tenant alone |
//! | `RUST_LOG` | unset: no tracing subscriber |
//!
//! Nothing here asserts a number.

#[path = "fairness/admin.rs"]
mod admin;
#[path = "fairness/child.rs"]
mod child;
#[path = "fairness/cpu.rs"]
mod cpu;
#[path = "broker_throughput/entry.rs"]
mod entry;
#[path = "broker_throughput/figures.rs"]
#[allow(dead_code)]
mod figures;
#[path = "fairness/fleet.rs"]
mod fleet;
#[path = "fairness/flood.rs"]
mod flood;
#[path = "fairness/protocol.rs"]
mod protocol;
#[path = "fairness/queue.rs"]
mod queue;
#[path = "fairness/settings.rs"]
mod settings;
#[path = "fairness/shares.rs"]
mod shares;
#[path = "broker_throughput/system.rs"]
#[allow(dead_code)]
mod system;
#[path = "fairness/tenants.rs"]
mod tenants;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lapin::uri::AMQPUri;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::admin::Admin;
use crate::fleet::Fleet;
use crate::queue::{FairJob, FairQueues};
use crate::settings::Settings;
use crate::system::load;
use crate::tenants::Tenants;

/// Errors end the benchmark with a message, never a panic.
pub(crate) type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Jobs per `enqueue_batch` call.
const BATCH: usize = 1_000;

/// What the phases share.
pub(crate) struct Bench<'a> {
    pub(crate) settings: Settings,
    pub(crate) producer: Producer<FairQueues, Arc<RabbitMqBackend>>,
    pub(crate) admin: &'a Admin,
    pub(crate) tenants: Tenants,
}

impl Bench<'_> {
    /// Enqueues `jobs` jobs of `tenant` in batches; fails on the first job
    /// the broker did not take.
    pub(crate) async fn enqueue(&self, tenant: &str, jobs: usize) -> BenchResult<()> {
        let job = FairJob::new(tenant, self.settings.job_ms);
        let mut left = jobs;
        while left > 0 {
            let batch = left.min(BATCH);
            for outcome in self
                .producer
                .enqueue_batch(std::iter::repeat_n(&job, batch))
                .await
            {
                outcome?;
            }
            left -= batch;
        }
        Ok(())
    }
}

/// The 1-minute load average, as printed.
pub(crate) fn load_now() -> String {
    load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
}

/// The current second of the wall clock every process shares.
pub(crate) fn seconds_now() -> u64 {
    queue::now_micros() / 1_000_000
}

fn main() -> ExitCode {
    if let Ok(index) = std::env::var(child::CHILD) {
        return entry::main_with("fairness worker", child::Spec::read(&index), child::run);
    }
    entry::main_with("fairness", Settings::read(), |settings| async move {
        run(settings).await
    })
}

async fn run(settings: Settings) -> BenchResult<()> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let name = queue::fresh_name();
    queue::init(&name, settings.shards, settings.prefetch())?;
    settings.print(&name);
    let admin = Admin::connect(&settings.url, &format!("{name}-admin")).await?;
    let options = RabbitMqOptions::default()
        .connection_name(format!("{name}-producer"))
        .control_stream(queue::control_stream());
    let backend = match RabbitMqBackend::with_options(settings.url.as_str(), options).await {
        Ok(backend) => Arc::new(backend),
        Err(e) => {
            admin.close().await;
            return Err(e.into());
        }
    };
    let mut fleet = None;
    let measured = tokio::select! {
        measured = measure(settings.clone(), &admin, &backend, &mut fleet) => measured,
        signal = interrupted() => Err(format!("stopped by {signal}").into()),
    };
    // The workers, the producer and the queues go, whatever happened.
    if let Some(fleet) = fleet.take() {
        for problem in fleet.stop().await {
            eprintln!("fairness: {problem}");
        }
    }
    let _ = backend.close().await;
    let cleaned = clean_up(&settings, &admin, &name).await;
    admin.close().await;
    measured?;
    cleaned
}

/// Both phases; the fleet is put in `fleet` as soon as it starts, so that
/// the caller stops it whatever happens here.
async fn measure(
    settings: Settings,
    admin: &Admin,
    backend: &Arc<RabbitMqBackend>,
    fleet: &mut Option<Fleet>,
) -> BenchResult<()> {
    let producer = Producer::<FairQueues, _>::new(Arc::clone(backend)).await?;
    let tenants = Tenants::pick()?;
    let bench = Bench {
        settings,
        producer,
        admin,
        tenants,
    };
    flood::enqueue(&bench).await?;
    let name = FairQueues::Work.name();
    let started = fleet.insert(Fleet::start(
        &bench.settings,
        name,
        &bench.tenants.weights(),
    )?);
    started.ready(Duration::from_secs(60)).await?;
    // Every worker's consumers fill their prefetch before the first trial.
    tokio::time::sleep(Duration::from_secs(2)).await;
    flood::trials(&bench, started).await?;
    shares::run(&bench, started).await
}

/// Deletes every queue of the run, then lists what is left of it.
async fn clean_up(settings: &Settings, admin: &Admin, name: &str) -> BenchResult<()> {
    admin.delete(&queue::broker_queues()).await?;
    let vhost = settings
        .url
        .parse::<AMQPUri>()
        .map_or_else(|_| "/".to_owned(), |uri| uri.vhost);
    match admin::left_behind(&vhost, name).await {
        Some(left) if left.is_empty() => println!("- queues left on the broker: none"),
        Some(left) => {
            admin.delete(&left).await?;
            println!("- deleted queues left on the broker: {}", left.join(", "));
        }
        None => println!("- queues left on the broker: not checked (no rabbitmqctl here)"),
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM, so that an interrupted run still stops
/// its workers and deletes its queues.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match terminate.as_mut() {
            Some(terminate) => terminate.recv().await,
            // Without a SIGTERM handler only Ctrl-C ends the run early.
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = terminated => "SIGTERM",
    }
}
