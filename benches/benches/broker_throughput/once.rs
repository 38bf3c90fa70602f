//! Jobs handled once: what the idempotency layer costs the consume path.
//!
//! - `once-10`, `once-100`: the consume row's queuey run
//!   ([`queuey_side::consume`], a no-op handler, prefetch and concurrency
//!   10 or 100) three ways in the same run, runs alternating: the handler
//!   alone (the plain row), inside an `IdempotencyLayer` on a
//!   `MemoryStore`, and inside one on a `RedisStore` (a private
//!   `redis-server` on a free port, started for the rows and stopped after
//!   them, so nothing is written to a shared Redis). Each job then costs the
//!   store a claim, a read, a record and a release.

use std::fmt::Write as _;

use std::time::Duration;

use crate::private_redis::PrivateRedis;
use queuey::layers::idempotency::IdempotencyLayer;
use queuey::store::MemoryStore;
use queuey_redis::RedisStore;

use crate::broker::Broker;
use crate::report::{cpu, median, percent, rates, thousands};
use crate::{BenchResult, Measured, PAUSE, Settings, queuey_side};

/// The prefetch counts of the rows.
const PREFETCHES: [u16; 2] = [10, 100];

/// The three ways, in the order of the tables.
const WAYS: [&str; 3] = ["plain", "memory", "redis"];

fn row_id(prefetch: u16) -> String {
    format!("once-{prefetch}")
}

/// Whether any of this module's rows is asked for.
pub(crate) fn wanted(settings: &Settings) -> bool {
    PREFETCHES
        .iter()
        .any(|&prefetch| settings.wants_id(&row_id(prefetch)))
}

/// Runs the rows asked for and returns their table.
pub(crate) async fn measure(broker: &Broker, settings: &Settings) -> BenchResult<String> {
    let redis = tokio::task::spawn_blocking(PrivateRedis::start).await?;
    let layers = [
        None,
        Some(IdempotencyLayer::new(MemoryStore::new())),
        Some(IdempotencyLayer::new(
            RedisStore::connect(&redis.url()).await?,
        )),
    ];
    let mut rows = Vec::new();
    for prefetch in PREFETCHES {
        if settings.wants_id(&row_id(prefetch)) {
            rows.push((prefetch, row(broker, settings, prefetch, &layers).await?));
        }
    }
    drop(redis);
    Ok(table(settings, &rows))
}

/// Every run of one row, by way (in the order of [`WAYS`]).
type Runs = [Vec<Measured>; 3];

async fn row(
    broker: &Broker,
    settings: &Settings,
    prefetch: u16,
    layers: &[Option<IdempotencyLayer>; 3],
) -> BenchResult<Runs> {
    let label = format!("queuey-{}", row_id(prefetch));
    let backend = queuey_side::backend(broker, &label, None, Duration::from_secs(1)).await?;
    let mut runs: Runs = [Vec::new(), Vec::new(), Vec::new()];
    let measured = async {
        for run in 0..settings.runs {
            for k in 0..WAYS.len() {
                // Each way goes first in turn.
                let way = (k + run) % WAYS.len();
                tokio::time::sleep(PAUSE).await;
                let measured = queuey_side::consume(
                    broker,
                    &backend,
                    prefetch,
                    settings.jobs,
                    true,
                    layers[way].as_ref(),
                )
                .await;
                broker.delete_created().await?;
                let measured = measured?;
                println!(
                    "{:<48} run {}/{}  {:<7} {:>8} jobs/s  in {:>6.2} s  cpu {}",
                    format!("consume, prefetch {prefetch}"),
                    run + 1,
                    settings.runs,
                    WAYS[way],
                    thousands(measured.rate()),
                    measured.elapsed.as_secs_f64(),
                    cpu(&[measured]),
                );
                runs[way].push(measured);
            }
        }
        BenchResult::Ok(())
    }
    .await;
    backend.close().await?;
    measured?;
    Ok(runs)
}

fn table(settings: &Settings, rows: &[(u16, Runs)]) -> String {
    let mut out = String::from("### Jobs handled once: the idempotency layer\n\n");
    let _ = writeln!(
        out,
        "Consume with a no-op handler, queuey on every side, {} jobs per run, the handler \
         alone, inside the idempotency layer on a MemoryStore, and on a RedisStore (private \
         redis-server on this machine); median of {} runs per way (min–max).\n",
        thousands(settings.jobs as f64),
        settings.runs
    );
    let _ = writeln!(
        out,
        "| operation | plain, jobs/s | MemoryStore, jobs/s | MemoryStore/plain | RedisStore, jobs/s | RedisStore/plain | cpu client / broker / other: plain | MemoryStore | RedisStore |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (prefetch, runs) in rows {
        let plain = median_rate(&runs[0]);
        let _ = writeln!(
            out,
            "| consume, prefetch {prefetch} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rates(&runs[0]),
            rates(&runs[1]),
            percent(median_rate(&runs[1]) / plain),
            rates(&runs[2]),
            percent(median_rate(&runs[2]) / plain),
            cpu(&runs[0]),
            cpu(&runs[1]),
            cpu(&runs[2]),
        );
    }
    out
}

fn median_rate(runs: &[Measured]) -> f64 {
    median(runs.iter().map(Measured::rate).collect())
}
