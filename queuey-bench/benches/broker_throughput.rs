//! Broker throughput: queuey against the physical limit of its own client
//! library, lapin, on the same broker, in one run.
//!
//! ```sh
//! AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//!     cargo bench -p queuey-bench --bench broker_throughput
//! cargo bench -p queuey-bench --bench broker_throughput -- consume retry   # only some rows
//! ```
//!
//! Each row measures one operation twice, once through queuey and once
//! written directly against lapin, and prints jobs/s for both and their
//! ratio (median of the runs):
//!
//! - **enqueue**: `Producer::enqueue` (publish, wait for the confirm) from
//!   1 task, and from 64 tasks with `publish_concurrency(64)`; lapin
//!   publishes one message at a time on each of as many confirm channels,
//!   one task per channel;
//! - **consume+ack**: a `Worker` with the default stack and a no-op handler
//!   at prefetch (and concurrency) 1, 10 and 100; lapin acks each delivery
//!   of one consumer with the same prefetch as it arrives, awaiting the
//!   acks concurrently;
//! - **no priorities**: enqueue from 64 tasks and consume+ack at prefetch
//!   10 and 100 again on queues without priority levels
//!   (`max_priority(0)`), where the broker does less work per message and
//!   the client's cost weighs more;
//! - **retry**: every job fails once and comes back through a 1 ms hold
//!   queue (`retry_granularity` 1 ms), and again with 100 ms; lapin
//!   publishes each first delivery to a TTL queue that dead-letters it
//!   back, waits for the confirm, acks, then acks the message when it
//!   returns. Jobs that never come back are counted as lost;
//! - **publish_concurrency**: enqueue from 128 tasks with pools of 1, 8, 32,
//!   64 and 128 channels, against lapin with as many channels, on queues
//!   with and without priorities.
//!
//! Messages are persistent; the job payload is 200 bytes of JSON and the
//! lapin bodies are exactly as long as queuey's envelopes, with the same
//! properties. Every run gets fresh durable classic queues named
//! `queuey-bench.{uuid}` (with queuey's default ten priority levels on both
//! sides, unless the row says otherwise), deleted right after it. Runs of
//! the two sides alternate (queuey first, then lapin first, ...) so that
//! drift hits both, and each run records the CPU used by this process, by the broker (when it runs on
//! this machine) and by everything else, and the load when it started.
//!
//! Environment:
//!
//! | variable | default |
//! |---|---|
//! | `AMQP_URL` | `amqp://guest:guest@127.0.0.1:5672/%2f` |
//! | `QUEUEY_BENCH_JOBS` | 20000 jobs per run |
//! | `QUEUEY_BENCH_SEQUENTIAL_JOBS` | 3000 jobs per run for the rows limited to one confirm at a time (a few thousand jobs/s) |
//! | `QUEUEY_BENCH_RUNS` | 3 runs per side and row |
//! | `QUEUEY_BENCH_SIDES` | `both`; `queuey` or `lapin` runs one side alone (for profiling; no ratios then) |
//! | `RUST_LOG` | unset: no tracing subscriber, as in the measurements; set it (`RUST_LOG=warn`) to see why a run failed |
//!
//! Nothing here asserts a target: the table says which were met.

#[path = "broker_throughput/broker.rs"]
mod broker;
#[path = "broker_throughput/lapin_side.rs"]
mod lapin_side;
#[path = "broker_throughput/queuey_side.rs"]
mod queuey_side;
#[path = "broker_throughput/report.rs"]
mod report;
#[path = "broker_throughput/system.rs"]
mod system;

use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lapin::uri::AMQPUri;

use crate::broker::Broker;
use crate::report::RowResult;
use crate::system::{CpuSample, CpuUse, Machine};

/// Errors end the benchmark with a message, never a panic.
pub(crate) type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// The longest a single measured run may take.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// A pause before every run, so the broker's work on the previous run's
/// queues (deleting them, its own bookkeeping) does not spill into it.
const PAUSE: Duration = Duration::from_millis(500);
/// The concurrency targets: queuey reaches this share of lapin's rate.
const TARGET: f64 = 0.9;
/// The pools of publishing channels compared for `publish_concurrency`.
const POOLS: [usize; 5] = [1, 8, 32, 64, 128];
/// Tasks enqueueing at once in the `publish_concurrency` comparison: more
/// than the largest pool, so the pool is what limits.
const POOL_TASKS: usize = 128;

/// What the benchmark does, from the environment and the arguments.
#[derive(Debug)]
struct Settings {
    url: String,
    jobs: usize,
    sequential_jobs: usize,
    runs: usize,
    /// Run only the rows these name (see [`Settings::wants`]).
    filters: Vec<String>,
    /// The sides to run: both, unless profiling one.
    sides: Vec<Side>,
}

impl Settings {
    fn read() -> Result<Settings, String> {
        let number = |name: &str, default: usize| -> Result<usize, String> {
            match std::env::var(name) {
                Ok(v) => v
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("{name} must be a positive integer, got `{v}`")),
                Err(_) => Ok(default),
            }
        };
        Ok(Settings {
            url: std::env::var("AMQP_URL")
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| DEFAULT_URL.to_owned()),
            jobs: number("QUEUEY_BENCH_JOBS", 20_000)?,
            sequential_jobs: number("QUEUEY_BENCH_SEQUENTIAL_JOBS", 3_000)?,
            runs: number("QUEUEY_BENCH_RUNS", 3)?,
            sides: match std::env::var("QUEUEY_BENCH_SIDES").as_deref() {
                Err(_) | Ok("") | Ok("both") => vec![Side::Queuey, Side::Lapin],
                Ok("queuey") => vec![Side::Queuey],
                Ok("lapin") => vec![Side::Lapin],
                Ok(other) => {
                    return Err(format!(
                        "QUEUEY_BENCH_SIDES must be queuey, lapin or both, got `{other}`"
                    ));
                }
            },
            // `cargo bench` passes `--bench`; options are not filters.
            filters: std::env::args()
                .skip(1)
                .filter(|a| !a.starts_with('-'))
                .collect(),
        })
    }

    /// A filter names a row (`consume-10`) or a group of rows (`consume`).
    fn wants(&self, row: &Row) -> bool {
        self.filters.is_empty()
            || self.filters.iter().any(|f| {
                row.id == *f
                    || row
                        .id
                        .strip_prefix(f.as_str())
                        .is_some_and(|rest| rest.starts_with('-'))
            })
    }
}

/// One measured operation.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// Short id, for filters and connection names: `consume-10`.
    id: String,
    pub(crate) label: String,
    kind: Kind,
    pub(crate) jobs: usize,
    /// The share of lapin's rate queuey should reach, if there is a target.
    pub(crate) target: Option<f64>,
    pool_comparison: bool,
    /// The work queue has queuey's default ten priority levels (`false`:
    /// none, `max_priority(0)`).
    priorities: bool,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `tasks` enqueuing tasks; `channels` publishing channels (queuey's
    /// `publish_concurrency`; lapin uses one task per channel).
    Enqueue {
        tasks: usize,
        channels: usize,
    },
    Consume {
        prefetch: u16,
    },
    /// Every job fails once and waits `hold_ms` (queuey's
    /// `retry_granularity`, and the lapin hold queue's TTL).
    Retry {
        prefetch: u16,
        channels: usize,
        hold_ms: u16,
    },
}

/// Which implementation a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Queuey,
    Lapin,
}

/// The retry rows' prefetch and publishing channels.
const RETRY_PREFETCH: u16 = 100;
const RETRY_CHANNELS: usize = 64;
/// The retry rows' hold times. 1 ms is what the issue asks for, but the
/// hold queue then expires 2 ms after its last declaration
/// (`x-expires = 2 * TTL`), and the broker deletes it with whatever it
/// still holds; a second row holds for 100 ms, where that is rare.
const RETRY_HOLDS_MS: [u16; 2] = [1, 100];

fn rows(settings: &Settings) -> Vec<Row> {
    let row = |id: String, label: String, kind, jobs, target| Row {
        id,
        label,
        kind,
        jobs,
        target,
        pool_comparison: false,
        priorities: true,
    };
    let mut rows = vec![
        row(
            "enqueue-1".into(),
            "enqueue with confirms, 1 task".into(),
            Kind::Enqueue {
                tasks: 1,
                channels: 1,
            },
            settings.sequential_jobs,
            None,
        ),
        row(
            "enqueue-64".into(),
            "enqueue with confirms, 64 tasks, 64 channels".into(),
            Kind::Enqueue {
                tasks: 64,
                channels: 64,
            },
            settings.jobs,
            Some(TARGET),
        ),
    ];
    for prefetch in [1, 10, 100] {
        rows.push(row(
            format!("consume-{prefetch}"),
            format!("consume → no-op → ack, prefetch {prefetch}"),
            Kind::Consume { prefetch },
            settings.jobs,
            Some(TARGET),
        ));
    }
    // The same on queues without priority levels, where the broker does
    // less per message and the client's share of the work shows more.
    let plain = |mut r: Row| {
        r.id.push_str("-plain");
        r.label.push_str(", no priorities");
        r.priorities = false;
        r
    };
    rows.push(plain(row(
        "enqueue-64".into(),
        "enqueue with confirms, 64 tasks, 64 channels".into(),
        Kind::Enqueue {
            tasks: 64,
            channels: 64,
        },
        settings.jobs,
        Some(TARGET),
    )));
    for prefetch in [10, 100] {
        rows.push(plain(row(
            format!("consume-{prefetch}"),
            format!("consume → no-op → ack, prefetch {prefetch}"),
            Kind::Consume { prefetch },
            settings.jobs,
            Some(TARGET),
        )));
    }
    for hold_ms in RETRY_HOLDS_MS {
        rows.push(row(
            format!("retry-{hold_ms}ms"),
            format!(
                "fail once, retry after {hold_ms} ms, ack; prefetch {RETRY_PREFETCH}, {RETRY_CHANNELS} channels"
            ),
            Kind::Retry {
                prefetch: RETRY_PREFETCH,
                channels: RETRY_CHANNELS,
                hold_ms,
            },
            settings.jobs,
            None,
        ));
    }
    for priorities in [true, false] {
        for channels in POOLS {
            let pool = Row {
                pool_comparison: true,
                ..row(
                    format!("pool-{channels}"),
                    format!("enqueue, {POOL_TASKS} tasks, publish_concurrency {channels}"),
                    Kind::Enqueue {
                        tasks: POOL_TASKS,
                        channels,
                    },
                    if channels == 1 {
                        settings.sequential_jobs
                    } else {
                        settings.jobs
                    },
                    None,
                )
            };
            rows.push(if priorities { pool } else { plain(pool) });
        }
    }
    rows.retain(|r| settings.wants(r));
    rows
}

/// A measured run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    pub(crate) jobs: usize,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: CpuUse,
    /// The 1-minute load when the run started.
    pub(crate) load: Option<f64>,
    /// Jobs that were neither completed nor back on their queue.
    pub(crate) lost: usize,
    /// Settles that failed (the delivery went back to the broker).
    pub(crate) settle_failures: u64,
}

impl Measured {
    pub(crate) fn rate(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64()
    }
}

/// The clock of one run, with the CPU counters read at its start.
pub(crate) struct Stopwatch {
    started: Instant,
    cpu: CpuSample,
    load: Option<f64>,
}

impl Stopwatch {
    pub(crate) fn start() -> Stopwatch {
        let load = system::load();
        let cpu = CpuSample::now(broker_pid());
        Stopwatch {
            started: Instant::now(),
            cpu,
            load,
        }
    }

    pub(crate) fn stop(self, jobs: usize) -> Measured {
        let elapsed = self.started.elapsed();
        Measured {
            jobs,
            elapsed,
            cpu: self.cpu.until_now(broker_pid()),
            load: self.load,
            lost: 0,
            settle_failures: 0,
        }
    }
}

/// The broker's pid, looked up once.
fn broker_pid() -> Option<u32> {
    static PID: OnceLock<Option<u32>> = OnceLock::new();
    *PID.get_or_init(system::broker_pid)
}

/// Task `task`'s share when `jobs` are split between `tasks` tasks.
pub(crate) fn share(jobs: usize, tasks: usize, task: usize) -> usize {
    jobs / tasks + usize::from(task < jobs % tasks)
}

fn main() -> ExitCode {
    let settings = match Settings::read() {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("broker_throughput: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("broker_throughput: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("broker_throughput: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: &Settings) -> BenchResult<()> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let uri: AMQPUri = settings
        .url
        .parse()
        .map_err(|e| format!("AMQP_URL is not an AMQP URL: {e}"))?;
    let shown = format!(
        "{}:{} (vhost `{}`)",
        uri.authority.host, uri.authority.port, uri.vhost
    );
    let broker = Broker::connect(&settings.url).await.map_err(|e| {
        format!(
            "cannot reach RabbitMQ at {shown}: {e}\n\
             Start a broker there, or point AMQP_URL at one (default {DEFAULT_URL})."
        )
    })?;

    let machine = Machine::read();
    let probe_name = broker.connection_name("version");
    let version = tokio::task::spawn_blocking(move || {
        system::broker_version(&uri, &probe_name, Duration::from_secs(5))
    })
    .await?
    .unwrap_or_else(|e| format!("unknown ({e})"));
    println!("## Broker throughput\n");
    println!("- broker: {version} at {shown}");
    println!(
        "- machine: {} cores, {:.1} GiB RAM, {}",
        machine.cores, machine.memory_gib, machine.cpu_model
    );
    println!(
        "- broker process on this machine: {}",
        broker_pid().map_or("not found (CPU shown as n/a)".to_owned(), |p| format!(
            "pid {p}"
        ))
    );
    println!(
        "- load (1 min) at start: {}",
        system::load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
    );
    println!(
        "- {} runs per side and row, interleaved; {} jobs per run ({} where one publish at a time limits)\n",
        settings.runs, settings.jobs, settings.sequential_jobs
    );

    let measured = tokio::select! {
        measured = measure_all(&broker, settings) => measured,
        signal = interrupted() => Err(format!("stopped by {signal}; the queues created so far are deleted").into()),
    };
    let cleaned = broker.delete_created().await;
    broker.close().await;
    let results = measured?;
    cleaned?;

    let lost: usize = results
        .iter()
        .map(|r| r.lost(Side::Queuey) + r.lost(Side::Lapin))
        .sum();
    let (pools, main): (Vec<RowResult>, Vec<RowResult>) =
        results.into_iter().partition(|r| r.row.pool_comparison);
    println!(
        "\n- load (1 min) at the end: {}\n",
        system::load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
    );
    if !main.is_empty() {
        println!("{}", report::table("queuey against lapin", &main));
    }
    if !pools.is_empty() {
        println!(
            "{}",
            report::table("Enqueue throughput by publish_concurrency", &pools)
        );
    }
    if lost > 0 {
        println!(
            "WARNING: {lost} jobs were lost: confirmed by the broker, then neither completed \
             nor back on their queue (see the \"jobs lost\" column)."
        );
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM, so that an interrupted run still deletes
/// its queues.
async fn interrupted() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "Ctrl-C",
                _ = terminate.recv() => "SIGTERM",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "Ctrl-C"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

async fn measure_all(broker: &Broker, settings: &Settings) -> BenchResult<Vec<RowResult>> {
    let mut results = Vec::new();
    for row in rows(settings) {
        results.push(measure_row(broker, settings, row).await?);
    }
    Ok(results)
}

/// Runs one row: a queuey backend and a lapin connection of its own, then
/// the runs of both sides, alternating which goes first.
async fn measure_row(broker: &Broker, settings: &Settings, row: Row) -> BenchResult<RowResult> {
    let (channels, granularity) = match row.kind {
        Kind::Enqueue { channels, .. } => (channels, Duration::from_secs(1)),
        // The worker only publishes to settle; acks need no channel of the pool.
        Kind::Consume { .. } => (1, Duration::from_secs(1)),
        Kind::Retry {
            channels, hold_ms, ..
        } => (channels, Duration::from_millis(u64::from(hold_ms))),
    };
    let backend =
        queuey_side::backend(broker, &format!("queuey-{}", row.id), channels, granularity).await?;
    let connection = broker::connect(
        broker.url(),
        &broker.connection_name(&format!("lapin-{}", row.id)),
    )
    .await?;
    let mut result = RowResult::new(row.clone());
    let runs = async {
        for run in 0..settings.runs {
            let order = if run % 2 == 0 {
                [Side::Queuey, Side::Lapin]
            } else {
                [Side::Lapin, Side::Queuey]
            };
            for side in order {
                if !settings.sides.contains(&side) {
                    continue;
                }
                tokio::time::sleep(PAUSE).await;
                let measured =
                    measure_once(broker, &backend, &connection, &row, side).await;
                // Delete the run's queues whatever happened.
                broker.delete_created().await?;
                let measured = measured?;
                println!(
                    "{:<48} run {}/{}  {:<6} {:>8} jobs/s  in {:>6.2} s  cpu client {:>3.0}% broker {:>4} other {:>3.0}%  load {}{}",
                    row.label,
                    run + 1,
                    settings.runs,
                    match side {
                        Side::Queuey => "queuey",
                        Side::Lapin => "lapin",
                    },
                    report::thousands(measured.rate()),
                    measured.elapsed.as_secs_f64(),
                    measured.cpu.client,
                    measured
                        .cpu
                        .broker
                        .map_or("n/a".to_owned(), |b| format!("{b:.0}%")),
                    measured.cpu.other,
                    measured.load.map_or("n/a".to_owned(), |l| format!("{l:.2}")),
                    if measured.lost > 0 || measured.settle_failures > 0 {
                        format!(
                            "  LOST {} jobs, {} settles failed",
                            measured.lost, measured.settle_failures
                        )
                    } else {
                        String::new()
                    },
                );
                result.push(side, measured);
            }
        }
        BenchResult::Ok(())
    }
    .await;
    let closed = backend.close().await;
    let _ = connection.close(200, "benchmark row done".into()).await;
    runs?;
    closed?;
    Ok(result)
}

async fn measure_once(
    broker: &Broker,
    backend: &queuey::RabbitMqBackend,
    connection: &lapin::Connection,
    row: &Row,
    side: Side,
) -> BenchResult<Measured> {
    let jobs = row.jobs;
    match (row.kind, side) {
        (Kind::Enqueue { tasks, .. }, Side::Queuey) => {
            queuey_side::enqueue(broker, backend, tasks, jobs, row.priorities).await
        }
        (Kind::Enqueue { channels, .. }, Side::Lapin) => {
            lapin_side::enqueue(broker, connection, channels, jobs, row.priorities).await
        }
        (Kind::Consume { prefetch }, Side::Queuey) => {
            queuey_side::consume(broker, backend, prefetch, jobs, row.priorities).await
        }
        (Kind::Consume { prefetch }, Side::Lapin) => {
            lapin_side::consume(broker, connection, prefetch, jobs, row.priorities).await
        }
        (
            Kind::Retry {
                prefetch, hold_ms, ..
            },
            Side::Queuey,
        ) => queuey_side::retry(broker, backend, prefetch, u64::from(hold_ms), jobs).await,
        (
            Kind::Retry {
                prefetch,
                channels,
                hold_ms,
            },
            Side::Lapin,
        ) => {
            let hold_ms = i32::from(hold_ms);
            lapin_side::retry(broker, connection, prefetch, channels, hold_ms, jobs).await
        }
    }
}
