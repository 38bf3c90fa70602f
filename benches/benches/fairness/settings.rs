//! What the benchmark does, from the environment, and what follows from
//! it: the queue's prefetch, the fleet's capacity, the backlog kept for
//! each busy tenant.

use std::time::Duration;

use crate::figures::thousands;
use crate::load_now;
use crate::system::Machine;

/// A positive integer from the environment variable `name`, else
/// `default`.
fn number(name: &str, default: u64) -> Result<u64, String> {
    let Ok(value) = std::env::var(name) else {
        return Ok(default);
    };
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name} must be a positive integer, got `{value}`")),
    }
}

/// What the benchmark does, from the environment.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The broker.
    pub(crate) url: String,
    /// Worker processes, and job slots in each.
    pub(crate) workers: usize,
    pub(crate) slots: usize,
    /// Shards of the queue: one per tenant at least.
    pub(crate) shards: u16,
    /// How long a job's handler sleeps.
    pub(crate) job_ms: u64,
    /// Jobs of the flood, and trials while it waits, this far apart.
    pub(crate) flood: usize,
    pub(crate) trials: usize,
    pub(crate) trial_gap: Duration,
    /// The shared window, and the heavy tenant's window alone.
    pub(crate) window: Duration,
    pub(crate) alone: Duration,
}

impl Settings {
    pub(crate) fn read() -> Result<Settings, String> {
        let shards = number("QUEUEY_BENCH_FAIR_SHARDS", 16)?;
        let shards = u16::try_from(shards)
            .ok()
            .filter(|s| (5..=queuey::shard::MAX_SHARDS).contains(s))
            .ok_or_else(|| format!("QUEUEY_BENCH_FAIR_SHARDS must be 5 to 256, got {shards}"))?;
        let size = |n: u64| usize::try_from(n).map_err(|e| e.to_string());
        Ok(Settings {
            url: std::env::var("AMQP_URL")
                .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned()),
            workers: size(number("QUEUEY_BENCH_WORKERS", 4)?)?,
            slots: size(number("QUEUEY_BENCH_SLOTS", 8)?)?,
            shards,
            job_ms: number("QUEUEY_BENCH_JOB_MS", 10)?,
            flood: size(number("QUEUEY_BENCH_FLOOD", 100_000)?)?,
            trials: size(number("QUEUEY_BENCH_TRIALS", 100)?)?,
            trial_gap: Duration::from_millis(number("QUEUEY_BENCH_TRIAL_MS", 150)?),
            window: Duration::from_secs(number("QUEUEY_BENCH_WINDOW_SECS", 60)?),
            alone: Duration::from_secs(number("QUEUEY_BENCH_ALONE_SECS", 20)?),
        })
    }

    /// The logical queue's prefetch: 4 × the slots for each of its broker
    /// queues (the shards and the lane), as each consumer takes an equal
    /// share, rounded up.
    pub(crate) fn prefetch(&self) -> u16 {
        let per_consumer = self.slots.saturating_mul(4);
        let total = per_consumer.saturating_mul(usize::from(self.shards) + 1);
        u16::try_from(total).unwrap_or(u16::MAX)
    }

    /// Starts per second the fleet's slots allow.
    pub(crate) fn capacity(&self) -> f64 {
        (self.workers * self.slots) as f64 * 1_000.0 / self.job_ms as f64
    }

    /// The backlog the parent keeps each busy tenant at in the shares
    /// phase: two seconds of the whole fleet's work, at least 1,000.
    pub(crate) fn low_water(&self) -> u32 {
        (self.capacity() * 2.0).clamp(1_000.0, f64::from(u32::MAX / 2)) as u32
    }

    /// Prints the machine and the settings.
    pub(crate) fn print(&self, name: &str) {
        let machine = Machine::read();
        println!("# Fairness between tenants\n");
        println!(
            "- machine: {} cores, {:.1} GiB RAM, {}",
            machine.cores, machine.memory_gib, machine.cpu_model
        );
        println!("- load (1 min) at the start: {}", load_now());
        println!(
            "- queue `{name}`: classic, {} shards + the lane, prefetch {} ({} per shard consumer of \
             a worker)",
            self.shards,
            self.prefetch(),
            self.prefetch().div_ceil(self.shards + 1),
        );
        println!(
            "- {} worker processes × {} slots, handler sleeps {} ms: at most {} starts/s",
            self.workers,
            self.slots,
            self.job_ms,
            thousands(self.capacity()),
        );
        println!(
            "- flood {} jobs, {} trials {} ms apart, shared window {} s, alone {} s\n",
            thousands(self.flood as f64),
            self.trials,
            self.trial_gap.as_millis(),
            self.window.as_secs(),
            self.alone.as_secs(),
        );
    }
}
