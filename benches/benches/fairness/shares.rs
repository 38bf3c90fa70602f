//! Shares by weight: three tenants (3 : 1 : 1) whose backlogs the parent
//! keeps topped up, counted over a window of the shared wall clock; then
//! the heavy tenant alone.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::try_join_all;

use crate::cpu::Mark;
use crate::fleet::Fleet;
use crate::queue::{self, now_micros, shard_of};
use crate::{Bench, BenchResult, figures::thousands, load_now, seconds_now};

/// Seconds between the end of the filling and a window's start, so that
/// every worker holds every busy tenant's jobs when the count begins.
const WARM_UP: u64 = 3;
/// How long the backlogs may take to fill before the first window.
const FILL_TIMEOUT: Duration = Duration::from_secs(120);

/// What the workers started in one window, and who used the CPU.
struct Counted {
    seconds: Range<u64>,
    /// By tenant, over the fleet, then per worker.
    fleet: HashMap<String, u64>,
    workers: Vec<HashMap<String, u64>>,
    cpu: String,
}

impl Counted {
    fn total(&self) -> u64 {
        self.fleet.values().sum()
    }

    fn rate(&self) -> f64 {
        self.total() as f64 / (self.seconds.end - self.seconds.start) as f64
    }

    fn share(&self, tenant: &str) -> f64 {
        self.fleet.get(tenant).copied().unwrap_or(0) as f64 * 100.0 / self.total().max(1) as f64
    }
}

/// The parent's feed of one tenant's backlog.
#[derive(Debug, Default)]
struct Feed {
    /// Set to stop feeding (the feeder then purges the tenant's shard).
    stop: AtomicBool,
    /// Each backlog read, with when it was read (µs).
    backlogs: Mutex<Vec<(u64, u32)>>,
}

/// The phase: fill, the shared window, the heavy tenant alone.
pub(crate) async fn run(bench: &Bench<'_>, fleet: &Fleet) -> BenchResult<()> {
    let weighted = bench.tenants.weighted();
    println!("## Shares by weight\n");
    let low = bench.settings.low_water();
    println!(
        "- tenants: {}; the parent keeps each one's backlog at {} ready jobs or more (adds {} \
         when it reads less, every 200 ms)",
        weighted
            .iter()
            .map(|(t, w)| format!("`{t}` weight {w} on shard {}", shard_of(t)))
            .collect::<Vec<_>>()
            .join(", "),
        thousands(f64::from(low)),
        thousands(f64::from(low / 2)),
    );
    let feeds: Vec<Feed> = weighted.iter().map(|_| Feed::default()).collect();
    let feeders = try_join_all(
        weighted
            .iter()
            .zip(&feeds)
            .map(|((tenant, _), feed)| feed_one(bench, tenant, feed, low)),
    );
    let measured = async {
        let measured = measure(bench, fleet, &feeds).await;
        for feed in &feeds {
            feed.stop.store(true, Ordering::Release);
        }
        measured
    };
    tokio::try_join!(feeders, measured)?;
    Ok(())
}

/// Fills, counts the shared window, stops the light tenants (their feeders
/// purge their shards), counts the heavy tenant alone.
async fn measure(bench: &Bench<'_>, fleet: &Fleet, feeds: &[Feed]) -> BenchResult<()> {
    let weighted = bench.tenants.weighted();
    let low = bench.settings.low_water();
    settle(bench, fleet, &weighted, |backlog| backlog >= low).await?;
    println!("- load (1 min) before the shared window: {}", load_now());
    let shared = count(fleet, bench.settings.window).await?;
    print_shared(bench, &shared, feeds);
    for feed in &feeds[1..] {
        feed.stop.store(true, Ordering::Release);
    }
    settle(bench, fleet, &weighted[1..], |backlog| backlog == 0).await?;
    println!("## One tenant alone\n");
    println!("- load (1 min) before: {}", load_now());
    let alone = count(fleet, bench.settings.alone).await?;
    print_alone(bench, &shared, &alone, &feeds[0]);
    Ok(())
}

/// Waits until the backlog of each of `tenants` passes `done`.
async fn settle(
    bench: &Bench<'_>,
    fleet: &Fleet,
    tenants: &[(&str, u32)],
    done: impl Fn(u32) -> bool,
) -> BenchResult<()> {
    let started = Instant::now();
    for (tenant, _) in tenants {
        let shard = queue::shard_queue(tenant);
        while !done(bench.admin.backlog(&shard).await?) {
            fleet.check()?;
            if started.elapsed() > FILL_TIMEOUT {
                return Err(format!("the backlog of `{tenant}` did not settle in time").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Counts the starts of a window of `length` that begins [`WARM_UP`]
/// seconds after the next whole second.
async fn count(fleet: &Fleet, length: Duration) -> BenchResult<Counted> {
    let start = seconds_now() + 1 + WARM_UP;
    let seconds = start..start + length.as_secs().max(1);
    sleep_until_second(start).await;
    let cpu = Mark::now(fleet.pids());
    sleep_until_second(seconds.end).await;
    let cpu = cpu.used();
    // The workers send a second's counts a quarter of a second after it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    fleet.check()?;
    let tally = fleet.tally();
    let owned = |counts: HashMap<&str, u64>| -> HashMap<String, u64> {
        counts.into_iter().map(|(t, n)| (t.to_owned(), n)).collect()
    };
    let workers = (0..fleet.workers())
        .map(|w| owned(tally.starts(&seconds, Some(w))))
        .collect();
    Ok(Counted {
        fleet: owned(tally.starts(&seconds, None)),
        workers,
        seconds,
        cpu,
    })
}

async fn sleep_until_second(second: u64) {
    let wait = (second * 1_000_000).saturating_sub(now_micros());
    tokio::time::sleep(Duration::from_micros(wait)).await;
}

/// Keeps `tenant`'s backlog at `low` or more until `feed` is stopped,
/// then purges it.
async fn feed_one(bench: &Bench<'_>, tenant: &str, feed: &Feed, low: u32) -> BenchResult<()> {
    let shard = queue::shard_queue(tenant);
    while !feed.stop.load(Ordering::Acquire) {
        let backlog = bench.admin.backlog(&shard).await?;
        feed.backlogs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((now_micros(), backlog));
        if backlog < low {
            bench.enqueue(tenant, low as usize / 2).await?;
        } else {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    bench.admin.purge(&shard).await?;
    Ok(())
}

impl Feed {
    /// The lowest backlog read in `seconds`.
    fn lowest(&self, seconds: &Range<u64>) -> Option<u32> {
        self.backlogs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(at, _)| seconds.contains(&(at / 1_000_000)))
            .map(|&(_, backlog)| backlog)
            .min()
    }
}

fn print_shared(bench: &Bench<'_>, shared: &Counted, feeds: &[Feed]) {
    let weighted = bench.tenants.weighted();
    let weights: u32 = weighted.iter().map(|(_, w)| w).sum();
    println!(
        "- shared window: {} s, after {WARM_UP} s of warm-up; cpu: {}\n",
        shared.seconds.end - shared.seconds.start,
        shared.cpu
    );
    println!("| tenant | weight | shard | starts | share | target | lowest backlog read |");
    println!("|---|--:|--:|--:|--:|--:|--:|");
    for ((tenant, weight), feed) in weighted.iter().zip(feeds) {
        println!(
            "| `{tenant}` | {weight} | {} | {} | {:.1} % | {:.0} % | {} |",
            shard_of(tenant),
            thousands(shared.fleet.get(*tenant).copied().unwrap_or(0) as f64),
            shared.share(tenant),
            f64::from(*weight) * 100.0 / f64::from(weights),
            feed.lowest(&shared.seconds)
                .map_or("–".to_owned(), |b| thousands(f64::from(b))),
        );
    }
    let s = &bench.settings;
    println!(
        "\n- the fleet started {} jobs/s (its slots allow {}: {} workers × {} slots / {} ms)",
        thousands(shared.rate()),
        thousands(s.capacity()),
        s.workers,
        s.slots,
        s.job_ms,
    );
    let by_worker: Vec<String> = shared
        .workers
        .iter()
        .enumerate()
        .map(|(i, counts)| {
            let all: u64 = counts.values().sum();
            let shares: Vec<String> = weighted
                .iter()
                .map(|(t, _)| {
                    let n = counts.get(*t).copied().unwrap_or(0);
                    format!("{:.0}", n as f64 * 100.0 / all.max(1) as f64)
                })
                .collect();
            format!(
                "worker {i} {} % of {}",
                shares.join("/"),
                thousands(all as f64)
            )
        })
        .collect();
    println!("- by worker: {}\n", by_worker.join(", "));
}

fn print_alone(bench: &Bench<'_>, shared: &Counted, alone: &Counted, heavy_feed: &Feed) {
    let heavy = &bench.tenants.heavy;
    println!(
        "- `{heavy}` alone for {} s: {:.1} % of {} starts (its lowest backlog read: {}); the \
         fleet started {} jobs/s, against {} jobs/s in the shared window ({:.2}×); cpu: {}\n",
        alone.seconds.end - alone.seconds.start,
        alone.share(heavy),
        thousands(alone.total() as f64),
        heavy_feed
            .lowest(&alone.seconds)
            .map_or("–".to_owned(), |b| thousands(f64::from(b))),
        thousands(alone.rate()),
        thousands(shared.rate()),
        alone.rate() / shared.rate().max(1e-9),
        alone.cpu,
    );
}
