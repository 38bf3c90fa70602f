//! Flood isolation: one tenant's large backlog, and how long a job of
//! another tenant waits behind it.

use std::time::{Duration, Instant};

use crate::cpu::Mark;
use crate::fleet::Fleet;
use crate::queue::{self, FairJob, shard_of};
use crate::{Bench, BenchResult, figures::thousands, load_now, seconds_now};

/// How long the parent waits for the last timed jobs to be reported.
const STRAGGLERS: Duration = Duration::from_secs(30);

/// Enqueues the flood, before the workers start.
pub(crate) async fn enqueue(bench: &Bench<'_>) -> BenchResult<()> {
    let tenant = &bench.tenants.flood;
    let jobs = bench.settings.flood;
    println!("## Flood isolation\n");
    println!("- load (1 min) before the flood: {}", load_now());
    let started = Instant::now();
    bench.enqueue(tenant, jobs).await?;
    let took = started.elapsed().as_secs_f64();
    println!(
        "- tenant `{tenant}` (shard {}) enqueued {} jobs in {took:.1} s ({} jobs/s, \
         `enqueue_batch`), before the workers started",
        shard_of(tenant),
        thousands(jobs as f64),
        thousands(jobs as f64 / took),
    );
    Ok(())
}

/// The trials: one timed job of the probe tenant at a time, while the
/// flood's backlog waits; then the flood's shard is purged.
pub(crate) async fn trials(bench: &Bench<'_>, fleet: &Fleet) -> BenchResult<()> {
    let settings = &bench.settings;
    let (flood, probe) = (&bench.tenants.flood, &bench.tenants.probe);
    let flood_shard = queue::shard_queue(flood);
    println!(
        "- tenant `{probe}` is on shard {}, not the flood's shard {}: {} trials, one job each, \
         {} ms apart",
        shard_of(probe),
        shard_of(flood),
        settings.trials,
        settings.trial_gap.as_millis(),
    );
    println!("- load (1 min) before the trials: {}", load_now());
    let cpu = Mark::now(fleet.pids());
    let first_second = seconds_now();
    let mut backlogs = Vec::with_capacity(settings.trials);
    for trial in 0..settings.trials {
        fleet.check()?;
        backlogs.push(bench.admin.backlog(&flood_shard).await?);
        let trial = u32::try_from(trial).unwrap_or(u32::MAX);
        bench
            .producer
            .enqueue(&FairJob::timed(probe, settings.job_ms, trial))
            .await?;
        tokio::time::sleep(settings.trial_gap).await;
    }
    let used = cpu.used();
    let seconds = first_second + 1..seconds_now();
    let waits = waits(fleet, settings.trials).await;
    report(&waits, settings.trials, &backlogs);
    let (all, flooded) = {
        let tally = fleet.tally();
        let starts = tally.starts(&seconds, None);
        let flooded = starts.get(flood.as_str()).copied().unwrap_or(0);
        (starts.values().sum::<u64>(), flooded)
    };
    let span = seconds.end.saturating_sub(seconds.start).max(1) as f64;
    println!(
        "- during the trials the fleet started {} jobs/s, {:.1} % of them the flood's; cpu: {used}",
        thousands(all as f64 / span),
        flooded as f64 * 100.0 / all.max(1) as f64,
    );
    let purged = bench.admin.purge(&flood_shard).await?;
    println!(
        "- the flood's {} jobs left were purged\n",
        thousands(f64::from(purged))
    );
    Ok(())
}

/// Each trial's wait, sorted, once every one is reported or
/// [`STRAGGLERS`] passed.
async fn waits(fleet: &Fleet, trials: usize) -> Vec<Duration> {
    let started = Instant::now();
    while fleet.tally().late.len() < trials && started.elapsed() < STRAGGLERS {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut waits: Vec<Duration> = fleet
        .tally()
        .late
        .values()
        .map(|&us| Duration::from_micros(us))
        .collect();
    waits.sort();
    waits
}

/// Prints the percentiles of the waits and the flood's backlog.
fn report(waits: &[Duration], trials: usize, backlogs: &[u32]) {
    let ms = |p: f64| {
        // The nearest rank: the smallest wait at or above a share p of all.
        let rank = ((p * waits.len() as f64).ceil() as usize).clamp(1, waits.len().max(1));
        waits.get(rank - 1).map_or("–".to_owned(), |w| {
            format!("{:.1} ms", w.as_secs_f64() * 1e3)
        })
    };
    println!(
        "- wait from enqueue to start: p50 {}, p99 {}, max {} over {} trials (target: p99 < 1 s){}",
        ms(0.50),
        ms(0.99),
        waits.last().map_or("–".to_owned(), |w| format!(
            "{:.1} ms",
            w.as_secs_f64() * 1e3
        )),
        waits.len(),
        match trials - waits.len().min(trials) {
            0 => String::new(),
            missing => format!("; {missing} never started within {STRAGGLERS:?}"),
        },
    );
    let empty = backlogs.iter().filter(|&&b| b == 0).count();
    println!(
        "- the flood's backlog (ready jobs in its shard): {} at the first trial, {} at the last{}",
        thousands(f64::from(backlogs.first().copied().unwrap_or(0))),
        thousands(f64::from(backlogs.last().copied().unwrap_or(0))),
        match empty {
            0 => String::new(),
            n => format!(" (empty at {n} trials: give a larger QUEUEY_BENCH_FLOOD)"),
        },
    );
}
