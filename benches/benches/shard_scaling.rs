//! Shard scaling: one logical quorum queue with 1, 2 and 4 shards on a
//! three-node RabbitMQ cluster that this benchmark starts (and stops)
//! itself, in one run.
//!
//! ```sh
//! cargo bench -p queuey-bench --bench shard_scaling
//! QUEUEY_BENCH_SHARDS=1,4,8 QUEUEY_BENCH_RUNS=5 cargo bench -p queuey-bench --bench shard_scaling
//! ```
//!
//! Three private nodes (the test suites' cluster kit: own names, ports
//! and directories, stopped and removed at the end, also on an error or
//! Ctrl-C) form a cluster. A producer and a worker connect with every
//! node's address, node 1 first. Each run declares a fresh quorum queue
//! `queuey-bench-shards.{uuid}` with N shards (1: an unsharded queue) and
//! queuey's defaults (a quorum dead-letter and suspect queue each), then:
//!
//! - **enqueue**: `Producer::enqueue` from 64 tasks, each waiting for its
//!   confirm, default options; jobs without a key, so they go to the
//!   shards in turn;
//! - **consume**: a `Worker` with the default stack, a no-op handler and
//!   100 job slots drains them (the queue's prefetch of 100 is split over
//!   the lane and the shards).
//!
//! Around each phase it reads the CPU time of every node's Erlang VM (by
//! the pid in the node's pid file), of this process and of the machine from
//! `/proc`, and reports CPU per job on each node, with each node's idle use
//! (measured for a few seconds before the runs) taken off. The runs of the
//! shard counts alternate (1, 2, 4, then 4, 2, 1, ...) so that drift hits
//! every count; the queues of a run are deleted right after it.
//!
//! Environment:
//!
//! | variable | default |
//! |---|---|
//! | `QUEUEY_BENCH_JOBS` | 10000 jobs per run |
//! | `QUEUEY_BENCH_RUNS` | 3 runs per shard count |
//! | `QUEUEY_BENCH_SHARDS` | `1,2,4` |
//! | `RUST_LOG` | unset: no tracing subscriber |
//!
//! Needs root and the `rabbitmq-server` package (as the private nodes of
//! the test suites do); the shared broker is not used. Nothing here
//! asserts a number.

#[path = "shard_scaling/cpu.rs"]
mod cpu;
#[path = "broker_throughput/entry.rs"]
mod entry;
#[path = "broker_throughput/figures.rs"]
mod figures;
#[path = "shard_scaling/measure.rs"]
mod measure;
#[path = "shard_scaling/private.rs"]
mod private;
#[path = "shard_scaling/queue.rs"]
mod queue;
#[path = "shard_scaling/report.rs"]
mod report;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lapin::{Connection, ConnectionProperties};
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::cpu::Sample;
use crate::cpu::system::{Machine, load};
use crate::measure::{Bench, Layout, Run};
use crate::private::cluster::Cluster;
use crate::report::Idle;

/// Errors end the benchmark with a message, never a panic.
pub(crate) type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Nodes in the cluster.
const NODES: usize = 3;
/// How long the nodes' idle CPU use is measured before the runs.
const IDLE: Duration = Duration::from_secs(3);

/// What the benchmark does, from the environment.
#[derive(Debug)]
struct Settings {
    jobs: usize,
    runs: usize,
    shards: Vec<u16>,
}

impl Settings {
    /// Each shard count on the clients' node; an unsharded queue a second
    /// time declared through node 2, so that it is led by another node than
    /// the clients', as every shard is.
    fn layouts(&self) -> Vec<Layout> {
        let mut layouts = Vec::new();
        for &shards in &self.shards {
            layouts.push(Layout {
                shards,
                declared_on: None,
            });
            if shards == 1 {
                layouts.push(Layout {
                    shards,
                    declared_on: Some(1),
                });
            }
        }
        layouts
    }

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
        let shards = match std::env::var("QUEUEY_BENCH_SHARDS") {
            Ok(list) => list
                .split(',')
                .map(|n| n.trim().parse::<u16>().ok().filter(|&n| n > 0))
                .collect::<Option<Vec<u16>>>()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    format!("QUEUEY_BENCH_SHARDS must be shard counts like `1,2,4`, got `{list}`")
                })?,
            Err(_) => vec![1, 2, 4],
        };
        Ok(Settings {
            jobs: number("QUEUEY_BENCH_JOBS", 10_000)?,
            runs: number("QUEUEY_BENCH_RUNS", 3)?,
            shards,
        })
    }
}

fn main() -> ExitCode {
    entry::main_with("shard_scaling", Settings::read(), |settings| async move {
        run(&settings).await
    })
}

async fn run(settings: &Settings) -> BenchResult<()> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    private::node::available().map_err(|why| {
        format!("this benchmark starts a private cluster, which cannot start here: {why}")
    })?;
    let machine = Machine::read();
    println!("## Shard scaling\n");
    println!(
        "- machine: {} cores, {:.1} GiB RAM, {}",
        machine.cores, machine.memory_gib, machine.cpu_model
    );
    println!(
        "- load (1 min) before the cluster starts: {}",
        load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
    );
    // The kit panics (after stopping what it started) when a node does not
    // start or join: that ends the benchmark with its message.
    let cluster = tokio::spawn(Cluster::start("bench-shards", NODES))
        .await
        .map_err(|_| "the cluster did not form (see the message above)")?;
    let (started, joined) = cluster.formed_in();
    println!(
        "- a cluster of {NODES} private nodes: started in {:.1} s, joined in {:.1} s",
        started.as_secs_f64(),
        joined.as_secs_f64()
    );
    println!(
        "- {} runs per shard count, counts alternating; {} jobs per run (+{} warm-up enqueues, \
         consumed too)\n",
        settings.runs,
        settings.jobs,
        measure::TASKS
    );
    let measured = tokio::select! {
        measured = measure_all(&cluster, settings) => measured,
        signal = interrupted() => Err(format!("stopped by {signal}").into()),
    };
    // The nodes stop (and their directories go) whatever happened.
    tokio::task::spawn_blocking(move || drop(cluster)).await?;
    let (runs, idle) = measured?;
    println!(
        "\n- load (1 min) at the end: {}\n",
        load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
    );
    println!("{}", report::tables(&runs, &idle, machine.cores));
    Ok(())
}

/// The clients, the idle measurement, then every run.
async fn measure_all(cluster: &Cluster, settings: &Settings) -> BenchResult<(Vec<Run>, Idle)> {
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let prefix = format!("queuey-bench-{id}");
    let backend = |role: &str| {
        let options = RabbitMqOptions::default().connection_name(format!("{prefix}-{role}"));
        RabbitMqBackend::with_options(cluster.urls_from(0), options)
    };
    let producer = Arc::new(backend("producer").await?);
    let worker = Arc::new(backend("worker").await?);
    let admin = Connection::connect(
        &cluster.node(0).url(),
        ConnectionProperties::default().with_connection_name(format!("{prefix}-admin").into()),
    )
    .await?;
    let pids: Vec<Option<u32>> = (0..cluster.len())
        .map(|i| cluster.node(i).os_pid())
        .collect();
    let bench = Bench {
        cluster,
        producer,
        worker,
        admin,
        pids,
        connection_prefix: prefix.clone(),
    };
    let outcome = runs(&bench, settings).await;
    let _ = bench.producer.close().await;
    let _ = bench.worker.close().await;
    let _ = bench.admin.close(200, "benchmark done".into()).await;
    outcome
}

async fn runs(bench: &Bench<'_>, settings: &Settings) -> BenchResult<(Vec<Run>, Idle)> {
    let before = Sample::now(&bench.pids);
    tokio::time::sleep(IDLE).await;
    let used = before.until(&Sample::now(&bench.pids));
    let wall = used.wall.as_secs_f64();
    let idle = Idle(used.nodes.iter().map(|n| n.unwrap_or(0.0) / wall).collect());
    println!(
        "- idle CPU of each node, taken off every phase: {}",
        idle.0
            .iter()
            .enumerate()
            .map(|(i, c)| format!("n{} {:.1} %", i + 1, c * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut runs = Vec::new();
    for round in 0..settings.runs {
        let mut order = settings.layouts();
        if round % 2 == 1 {
            order.reverse();
        }
        for layout in order {
            let run = bench.run(layout, settings.jobs).await?;
            let cpu = |phase: &measure::Phase| {
                phase
                    .used
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let percent = s.unwrap_or(f64::NAN) / phase.used.wall.as_secs_f64() * 100.0;
                        format!("n{} {percent:>3.0}%", i + 1)
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            println!(
                "shards {:<24} run {}/{}  enqueue {:>6.0} jobs/s (cpu {}, client {:>3.0}%)  \
                 consume {:>6.0} jobs/s (cpu {}, client {:>3.0}%)  load {}",
                layout.label(),
                round + 1,
                settings.runs,
                run.enqueue.rate(),
                cpu(&run.enqueue),
                run.enqueue.used.client / run.enqueue.used.wall.as_secs_f64() * 100.0,
                run.consume.rate(),
                cpu(&run.consume),
                run.consume.used.client / run.consume.used.wall.as_secs_f64() * 100.0,
                load().map_or("n/a".to_owned(), |l| format!("{l:.2}")),
            );
            runs.push(run);
        }
    }
    Ok((runs, idle))
}

/// Resolves on Ctrl-C or SIGTERM, so that an interrupted run still stops
/// its nodes.
async fn interrupted() -> &'static str {
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
