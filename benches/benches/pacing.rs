//! Per-key rate limits across a fleet under a sustained overload, and how
//! many deliveries each finished job costs, on the shared broker and Redis.
//!
//! ```sh
//! cargo bench -p queuey-bench --bench pacing
//! QUEUEY_BENCH_PACING_SECS=30 QUEUEY_BENCH_PACING_KEYS=5 \
//!     cargo bench -p queuey-bench --bench pacing
//! ```
//!
//! The scenario is a team calling a partner API that allows 3 calls a
//! second per host: the application offers 5 a second per host, to 20
//! hosts, for 10 minutes. The job type declares the partner's rate,
//! `#[job(limit(key = host, rate = "3/s"))]`; the workers keep it in a
//! Redis store (`WorkerBuilder::limit_store`, a fresh key prefix per mode).
//!
//! - **The fleet**: 4 `Worker`s in this process, each with its own
//!   RabbitMQ connection and its own Redis store connection (they share
//!   nothing but the broker and Redis, as processes would), 8 job slots
//!   each, a prefetch of 4 × the slots.
//! - **The partner**, simulated in the process and shared by the workers
//!   (it is the remote side): a token bucket per host, 3 calls a second
//!   with a burst of 3. A call it admits takes 20 ms (a tokio sleep) and
//!   succeeds; one it refuses answers `JobError::deferred` with its
//!   `Retry-After` rounded up to whole seconds, as HTTP's is, which the
//!   default stack defers without spending an attempt. A `CooldownLayer`
//!   keyed by host is given with the handler, as the guide recommends.
//! - **The load**: one producer, open loop: the hosts take turns, so each
//!   host's jobs are evenly spaced and the hosts staggered; each enqueue is
//!   a task of its own.
//! - **The modes**, one after the other, each on a fresh queue
//!   `queuey-bench-pacing.{run}.{mode}` with default `RabbitMqOptions`
//!   (quorum hold queues), a connection name per backend and a control
//!   stream of the run's: `booked`, where the producer has the workers'
//!   limit store (`ProducerBuilder::limit_store`) and books each job's turn
//!   at enqueue, sending it to arrive at its turn; and `unbooked`, where it
//!   has not and the workers alone pace (a job of a busy host is delivered,
//!   parked until its turn, and delivered again).
//!
//! Measured per mode over its window, from the first enqueue to the end of
//! the offered load (jobs still waiting then are not finished): jobs
//! offered; jobs finished (the handler returned `Ok`); deliveries, counted
//! by an outermost layer given with the handler, outside the cool-down and
//! the limit; deliveries per finished job (the headline); the `429`s the
//! partner answered; the most calls it admitted for one host in any
//! one-second sliding window (at most 3 + its burst) and the most starts of
//! one host in any such window; the mean start rate per host; the jobs
//! dead-lettered; the 1-minute load average at the window's start and end.
//! Each mode also prints the deliveries over its queue's life as counted by
//! the layer, by the workers (`WorkerHandle::jobs_started`) and by the
//! broker (its management API's `deliver_get`, read with `curl` when the
//! API answers on the broker's host, port 15672), how long the started
//! jobs had waited since their enqueue, the `429`s by minute of the window
//! (when there were any), and how many jobs were still waiting on the
//! broker.
//!
//! Everything a mode made (its work, dead-letter, suspect and hold queues,
//! its Redis keys) is deleted after it; the run's control streams and
//! anything left under its names at the end, also on an error or Ctrl-C;
//! then `rabbitmqctl` (when it reaches the broker) and a Redis scan check
//! that nothing is left.
//!
//! Environment:
//!
//! | variable | default |
//! |---|---|
//! | `AMQP_URL` | `amqp://guest:guest@127.0.0.1:5672/%2f` |
//! | `REDIS_URL` | `redis://127.0.0.1:6379` |
//! | `QUEUEY_BENCH_PACING_KEYS` | 20 hosts |
//! | `QUEUEY_BENCH_PACING_OFFERED` | 5 jobs a second per host |
//! | `QUEUEY_BENCH_PACING_SECS` | 600 s of offered load per mode |
//! | `QUEUEY_BENCH_PACING_WORKERS` | 4 workers |
//! | `QUEUEY_BENCH_PACING_SLOTS` | 8 job slots per worker |
//! | `QUEUEY_BENCH_PACING_MODES` | `booked,unbooked` |
//! | `RUST_LOG` | unset: no tracing subscriber |
//!
//! Nothing here asserts a number.

#[path = "fairness/admin.rs"]
#[allow(dead_code)]
mod admin;
#[path = "pacing/cleanup.rs"]
mod cleanup;
#[path = "broker_throughput/entry.rs"]
mod entry;
#[path = "broker_throughput/figures.rs"]
#[allow(dead_code)]
mod figures;
#[path = "pacing/fleet.rs"]
mod fleet;
#[path = "pacing/management.rs"]
mod management;
#[path = "pacing/mode.rs"]
mod mode;
#[path = "pacing/offer.rs"]
mod offer;
#[path = "pacing/partner.rs"]
mod partner;
#[path = "pacing/queue.rs"]
mod queue;
#[path = "pacing/report.rs"]
mod report;
#[path = "pacing/settings.rs"]
mod settings;
#[path = "broker_throughput/system.rs"]
#[allow(dead_code)]
mod system;
#[path = "pacing/tally.rs"]
mod tally;

use std::process::ExitCode;

use lapin::uri::AMQPUri;

use crate::admin::Admin;
use crate::mode::Rig;
use crate::report::Row;
use crate::settings::Settings;
use crate::system::load;

/// Errors end the benchmark with a message, never a panic.
pub(crate) type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The names of one run: every queue and Redis key it makes starts with
/// them.
pub(crate) struct Run {
    /// `queuey-bench-pacing.{uuid}`: the queues' prefix.
    pub(crate) name: String,
    /// `queuey-bench-pacing:{uuid}:`: the Redis keys' prefix.
    pub(crate) redis_prefix: String,
    /// The broker's virtual host.
    pub(crate) vhost: String,
}

impl Run {
    fn new(settings: &Settings) -> Run {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Run {
            name: format!("queuey-bench-pacing.{id}"),
            redis_prefix: format!("queuey-bench-pacing:{id}:"),
            vhost: settings
                .url
                .parse::<AMQPUri>()
                .map_or_else(|_| "/".to_owned(), |uri| uri.vhost),
        }
    }

    /// The control stream of every backend of the run (the workers follow
    /// it, and send their heartbeats to it with `.workers`), so that the
    /// run leaves no stream behind.
    pub(crate) fn control_stream(&self) -> String {
        format!("{}.control", self.name)
    }
}

/// The 1-minute load average, as printed.
pub(crate) fn load_now() -> String {
    load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
}

fn main() -> ExitCode {
    entry::main_with("pacing", Settings::read(), run)
}

async fn run(settings: Settings) -> BenchResult<()> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let run = Run::new(&settings);
    settings.print(&run.name);
    let admin = Admin::connect(&settings.url, &format!("{}-admin", run.name)).await?;
    let mut rig = Rig::default();
    let mut rows = Vec::new();
    let measured = tokio::select! {
        measured = every_mode(&settings, &run, &admin, &mut rig, &mut rows) => measured,
        signal = interrupted() => Err(format!("stopped by {signal}").into()),
    };
    // The workers and the producer stop, and everything of the run goes,
    // whatever happened.
    for problem in rig.stop().await {
        eprintln!("pacing: {problem}");
    }
    let cleaned = clean_up(&settings, &run, &admin).await;
    admin.close().await;
    if !rows.is_empty() {
        report::print(&rows);
    }
    measured?;
    cleaned
}

/// Each mode in turn: measured, stopped, its queues and keys deleted.
async fn every_mode(
    settings: &Settings,
    run: &Run,
    admin: &Admin,
    rig: &mut Rig,
    rows: &mut Vec<Row>,
) -> BenchResult<()> {
    for &mode in &settings.modes {
        let measured = mode::measure(settings, run, mode, admin, rig).await;
        for problem in rig.stop().await {
            eprintln!("pacing: {mode}: {problem}");
        }
        *rig = Rig::default();
        let cleaned = mode::clean_up(settings, run, mode, admin).await;
        rows.push(measured?);
        cleaned?;
    }
    Ok(())
}

/// Deletes whatever of the run is left (the control streams, and anything
/// an interrupted mode left), then checks that nothing is.
async fn clean_up(settings: &Settings, run: &Run, admin: &Admin) -> BenchResult<()> {
    let control = run.control_stream();
    let streams = [format!("{control}.workers"), control];
    let listed = cleanup::delete_queues(admin, &run.vhost, &run.name, &streams).await?;
    let keys = cleanup::delete_keys(&settings.redis_url, &run.redis_prefix).await?;
    if keys > 0 {
        println!("- deleted {keys} Redis keys left by an interrupted mode");
    }
    let left = listed.map(|listed| {
        let mut left: Vec<String> = listed
            .into_iter()
            .filter(|name| !streams.contains(name))
            .collect();
        left.sort_unstable();
        left
    });
    if let Some(left) = left.filter(|left| !left.is_empty()) {
        println!(
            "- deleted queues left by an interrupted mode: {}",
            left.join(", ")
        );
    }
    match admin::left_behind(&run.vhost, &run.name).await {
        Some(left) if left.is_empty() => println!("- queues of the run left on the broker: none"),
        Some(left) => {
            return Err(
                format!("queues of the run still on the broker: {}", left.join(", ")).into(),
            );
        }
        None => {
            println!("- queues of the run left on the broker: not checked (no rabbitmqctl here)")
        }
    }
    let keys = cleanup::keys_left(&settings.redis_url, &run.redis_prefix).await?;
    if keys.is_empty() {
        println!("- Redis keys of the run left: none\n");
        Ok(())
    } else {
        Err(format!("{} Redis keys of the run are left", keys.len()).into())
    }
}

/// Resolves on Ctrl-C or SIGTERM, so that an interrupted run still stops
/// its workers and deletes its queues and keys.
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
