//! Per-key limits: what a `LimitLayer` costs the consume path.
//!
//! - `limits-10`, `limits-100`: the consume row's queuey run
//!   ([`queuey_side::consume`], a no-op handler, the default stack,
//!   prefetch and concurrency 10 or 100) three ways in the same run, runs
//!   alternating: the handler alone (the plain row), inside a `LimitLayer`
//!   on a `MemoryStore`, and inside one on a `RedisStore` (a private
//!   `redis-server` on a free port, started for the rows and stopped after
//!   them, so nothing is written to a shared Redis).
//!
//! The layer allows each key [`CONCURRENCY`] jobs running at once and
//! [`RATE`] starts (burst 1: starts at least 1 ms apart). Each job is keyed
//! by its number among the deliveries the layer saw, modulo [`KEYS`]: the
//! queue is filled and consumed in order, so two jobs of a key are about
//! [`KEYS`] deliveries apart, tens of milliseconds at these rates, and no
//! job should wait. Each job then costs the store three calls, one after
//! the other: its turn under the rate, a running slot, and freeing the
//! slot (a no-op job ends long before the slot's first renewal, a third of
//! the 30 s lease). The deliveries deferred all the same are counted, and
//! the CPU time the redis-server spent (its `INFO cpu`, which the client
//! CPU column does not include) per job of the RedisStore runs.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use queuey::handler::JobRequest;
use queuey::layers::limit::{JobKey, LimitLayer};
use queuey::store::{LimitStore, MemoryStore, Rate};
use queuey_redis::RedisStore;

use crate::broker::Broker;
use crate::private_redis::PrivateRedis;
use crate::queuey_side::{Around, BenchJob, KeyedLimit};
use crate::report::{cpu, cpu_per_job, median, percent, rates, thousands};
use crate::{BenchResult, Measured, PAUSE, Settings, queuey_side, system};

/// The prefetch counts of the rows.
const PREFETCHES: [u16; 2] = [10, 100];

/// How many keys the jobs are spread over.
const KEYS: usize = 1_000;

/// Jobs of a key running at once, at most.
const CONCURRENCY: u32 = 3;

/// Starts of a key, at most: far above what a key is asked for.
const RATE: &str = "1000/s";

/// The ways of running the consume row, in the order of the tables.
const WAYS: [&str; 3] = ["plain", "MemoryStore", "RedisStore"];

/// Deliveries keyed so far, by every layer of the process.
static KEYED: AtomicUsize = AtomicUsize::new(0);

/// The key of a job: its delivery's number modulo [`KEYS`].
fn key(_: &JobRequest<BenchJob>) -> Option<String> {
    Some((KEYED.fetch_add(1, Ordering::Relaxed) % KEYS).to_string())
}

fn limit(store: impl LimitStore) -> BenchResult<KeyedLimit> {
    let key: JobKey<BenchJob> = key;
    Ok(LimitLayer::new("bench", store, key)
        .concurrency(CONCURRENCY)?
        .rate(RATE.parse::<Rate>()?))
}

/// The prefetch counts of the rows asked for (`limits-{prefetch}`).
fn asked(settings: &Settings) -> Vec<u16> {
    let asked = |prefetch: &u16| settings.wants_id(&format!("limits-{prefetch}"));
    PREFETCHES.into_iter().filter(asked).collect()
}

/// Whether any of this module's rows is asked for.
pub(crate) fn wanted(settings: &Settings) -> bool {
    !asked(settings).is_empty()
}

/// Runs the rows asked for and returns their table.
pub(crate) async fn measure(broker: &Broker, settings: &Settings) -> BenchResult<String> {
    let load_before = system::load();
    let redis = tokio::task::spawn_blocking(PrivateRedis::start).await?;
    let limits = [
        limit(MemoryStore::new())?,
        limit(RedisStore::connect(&redis.url()).await?)?,
    ];
    let mut rows = Vec::new();
    for prefetch in asked(settings) {
        let runs = row(broker, settings, prefetch, &limits, redis.port()).await?;
        rows.push((prefetch, runs));
    }
    drop(redis);
    let loads = [load_before, system::load()];
    Ok(table(settings, &rows, loads))
}

/// Every run of one row.
#[derive(Default)]
struct Runs {
    /// By way, in the order of [`WAYS`].
    ways: [Vec<Measured>; 3],
    /// The redis-server's CPU time per job of each RedisStore run, in µs.
    redis_cpu: Vec<f64>,
}

async fn row(
    broker: &Broker,
    settings: &Settings,
    prefetch: u16,
    limits: &[KeyedLimit; 2],
    redis_port: u16,
) -> BenchResult<Runs> {
    let arounds = [
        Around::Nothing,
        Around::Limit(&limits[0]),
        Around::Limit(&limits[1]),
    ];
    let name = format!("queuey-limits-{prefetch}");
    let backend = queuey_side::backend(broker, &name, None, Duration::from_secs(1)).await?;
    let mut runs = Runs::default();
    let mut measured = Ok(());
    // Every way goes first in turn: way `(run + turn) % 3`.
    let order = (0..settings.runs).flat_map(|run| (0..WAYS.len()).map(move |turn| (run, turn)));
    for (run, turn) in order {
        let way = (run + turn) % WAYS.len();
        tokio::time::sleep(PAUSE).await;
        let redis_before = redis_cpu_seconds(redis_port);
        let consumed = queuey_side::consume(
            broker,
            &backend,
            prefetch,
            settings.jobs,
            true,
            arounds[way],
        )
        .await;
        let cleaned = broker.delete_created().await;
        let one = match consumed.and_then(|one| cleaned.map(|()| one)) {
            Ok(one) => one,
            Err(error) => {
                measured = Err(error);
                break;
            }
        };
        // The server idles but for the measured part of the run.
        let redis_used = redis_cpu_seconds(redis_port)
            .zip(redis_before)
            .map(|(after, before)| (after - before) * 1e6 / one.jobs.max(1) as f64);
        let label = format!("consume, prefetch {prefetch}, keyed");
        let (n, of, way_name) = (run + 1, settings.runs, WAYS[way]);
        let (rate, seconds) = (thousands(one.rate()), one.elapsed.as_secs_f64());
        let (used, per_job) = (cpu(&[one]), cpu_per_job(&[one]));
        let (redis, deferred, at) = (micros(redis_used), one.deferred, load(one.load));
        println!(
            "{label:<29} run {n}/{of}  {way_name:<11} {rate:>8} jobs/s  \
             in {seconds:>6.2} s  cpu {used} ({per_job}/job)  redis-server {redis}/job  \
             deferred {deferred}  load {at}"
        );
        runs.ways[way].push(one);
        if let (2, Some(used)) = (way, redis_used) {
            runs.redis_cpu.push(used);
        }
    }
    backend.close().await?;
    measured?;
    Ok(runs)
}

/// The CPU time the redis-server on `port` used so far, in seconds (user
/// and system, from `INFO cpu`), if it answers. Blocking, and read between
/// runs only.
fn redis_cpu_seconds(port: u16) -> Option<f64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"INFO cpu\r\n").ok()?;
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).ok()?;
    let length: usize = header.trim().strip_prefix('$')?.parse().ok()?;
    let mut info = vec![0; length];
    reader.read_exact(&mut info).ok()?;
    let info = String::from_utf8(info).ok()?;
    let seconds = |field: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse::<f64>().ok())
    };
    Some(seconds("used_cpu_sys")? + seconds("used_cpu_user")?)
}

fn micros(value: Option<f64>) -> String {
    value.map_or("n/a".to_owned(), |v| format!("{v:.1} µs"))
}

fn load(load: Option<f64>) -> String {
    load.map_or("n/a".to_owned(), |l| format!("{l:.2}"))
}

fn table(settings: &Settings, rows: &[(u16, Runs)], loads: [Option<f64>; 2]) -> String {
    let mut out = String::from("### Per-key limits\n\n");
    let _ = writeln!(
        out,
        "Consume with a no-op handler, queuey on every side, {} jobs per run over {} keys \
         (delivery number mod {KEYS}), the handler alone, inside a `LimitLayer` with \
         `concurrency({CONCURRENCY})` and a rate of {RATE} per key on a MemoryStore, and on \
         a RedisStore (private redis-server on this machine); median of {} runs per way \
         (min–max). Load (1 min) {} at the start, {} at the end. The client's CPU per job \
         leaves out the redis-server's, shown apart.\n",
        thousands(settings.jobs as f64),
        thousands(KEYS as f64),
        settings.runs,
        load(loads[0]),
        load(loads[1]),
    );
    let _ = writeln!(
        out,
        "| operation | plain, jobs/s | MemoryStore, jobs/s | MemoryStore/plain | RedisStore, jobs/s | RedisStore/plain | client cpu per job: plain / MemoryStore / RedisStore | redis-server cpu per job | cpu client / broker / other: plain | MemoryStore | RedisStore | deferred: MemoryStore / RedisStore |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (prefetch, runs) in rows {
        let plain = Measured::median_rate(&runs.ways[0]);
        let mut cells = vec![
            format!("consume, prefetch {prefetch}"),
            rates(&runs.ways[0]),
        ];
        for limited in &runs.ways[1..] {
            cells.push(rates(limited));
            cells.push(percent(Measured::median_rate(limited) / plain));
        }
        let each = |cell: fn(&[Measured]) -> String, between: &str| {
            let cells: Vec<String> = runs.ways.iter().map(|way| cell(way)).collect();
            cells.join(between)
        };
        cells.push(each(cpu_per_job, " / "));
        let redis = median(runs.redis_cpu.clone());
        cells.push(micros(Some(redis).filter(|r| r.is_finite())));
        cells.push(each(cpu, " | "));
        let deferred = |runs: &[Measured]| runs.iter().map(|m| m.deferred).sum::<u64>();
        cells.push(format!(
            "{} / {}",
            deferred(&runs.ways[1]),
            deferred(&runs.ways[2])
        ));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}
