//! What the benchmark does, from the environment, and what follows from
//! it: the offered rate, the jobs of a mode, the queue's prefetch.

use std::fmt;
use std::time::Duration;

use crate::figures::thousands;
use crate::load_now;
use crate::partner::{PARTNER_BURST, PARTNER_RATE};
use crate::system::Machine;

/// How the producer of a mode enqueues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The producer has the workers' limit store: it books each job's turn
    /// and sends the job to arrive then.
    Booked,
    /// The producer sends each job at once; the workers alone pace.
    Unbooked,
}

impl Mode {
    fn parse(word: &str) -> Option<Mode> {
        match word.trim() {
            "booked" => Some(Mode::Booked),
            "unbooked" => Some(Mode::Unbooked),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Booked => "booked",
            Mode::Unbooked => "unbooked",
        })
    }
}

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

/// A positive number (fractions allowed) from the environment variable
/// `name`, else `default`.
fn rate(name: &str, default: f64) -> Result<f64, String> {
    let Ok(value) = std::env::var(name) else {
        return Ok(default);
    };
    match value.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err(format!("{name} must be a positive number, got `{value}`")),
    }
}

/// What the benchmark does, from the environment.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The broker, and Redis (the limit store).
    pub(crate) url: String,
    pub(crate) redis_url: String,
    /// Hosts (limit keys), and jobs offered per second to each.
    pub(crate) keys: usize,
    pub(crate) offered: f64,
    /// How long each mode offers its load.
    pub(crate) window: Duration,
    /// Workers, and job slots in each.
    pub(crate) workers: usize,
    pub(crate) slots: usize,
    /// The modes, in the order they run.
    pub(crate) modes: Vec<Mode>,
}

impl Settings {
    pub(crate) fn read() -> Result<Settings, String> {
        let size = |n: u64| usize::try_from(n).map_err(|e| e.to_string());
        let modes = std::env::var("QUEUEY_BENCH_PACING_MODES")
            .unwrap_or_else(|_| "booked,unbooked".to_owned());
        let modes = modes
            .split(',')
            .map(|word| {
                Mode::parse(word).ok_or_else(|| {
                    format!(
                        "QUEUEY_BENCH_PACING_MODES lists `booked` and `unbooked`, comma-separated; \
                         got `{modes}`"
                    )
                })
            })
            .collect::<Result<Vec<Mode>, String>>()?;
        let settings = Settings {
            url: std::env::var("AMQP_URL")
                .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned()),
            redis_url: std::env::var("REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned()),
            keys: size(number("QUEUEY_BENCH_PACING_KEYS", 20)?)?,
            offered: rate("QUEUEY_BENCH_PACING_OFFERED", 5.0)?,
            window: Duration::from_secs(number("QUEUEY_BENCH_PACING_SECS", 600)?),
            workers: size(number("QUEUEY_BENCH_PACING_WORKERS", 4)?)?,
            slots: size(number("QUEUEY_BENCH_PACING_SLOTS", 8)?)?,
            modes,
        };
        if settings.jobs() == 0 {
            return Err("the settings offer no job: raise QUEUEY_BENCH_PACING_SECS".to_owned());
        }
        Ok(settings)
    }

    /// Jobs offered in one mode: every host's, over the window.
    pub(crate) fn jobs(&self) -> u64 {
        (self.keys as f64 * self.offered * self.window.as_secs_f64()).round() as u64
    }

    /// Time between two enqueues of the producer: the hosts take turns, so
    /// each host's jobs are `1 / offered` apart and the hosts are staggered
    /// by this much.
    pub(crate) fn gap(&self) -> Duration {
        Duration::from_secs_f64(1.0 / (self.keys as f64 * self.offered))
    }

    /// Each worker's prefetch: 4 × its slots. Jobs arrive when they may
    /// start (booked) or are parked at once (unbooked), so the work queue
    /// keeps no backlog, and 4 × the slots keeps every slot fed between
    /// two broker round trips.
    pub(crate) fn prefetch(&self) -> u16 {
        u16::try_from(self.slots.saturating_mul(4)).unwrap_or(u16::MAX)
    }

    /// Prints the machine and the settings.
    pub(crate) fn print(&self, run: &str) {
        let machine = Machine::read();
        println!("# Pacing: per-key rate limits under a sustained overload\n");
        println!(
            "- machine: {} cores, {:.1} GiB RAM, {}",
            machine.cores, machine.memory_gib, machine.cpu_model
        );
        println!("- load (1 min) at the start: {}", load_now());
        println!(
            "- {} hosts, each offered {} jobs/s (open loop, evenly spaced, hosts staggered {:.1} ms \
             apart) for {} s per mode: {} jobs per mode",
            self.keys,
            self.offered,
            self.gap().as_secs_f64() * 1_000.0,
            self.window.as_secs(),
            thousands(self.jobs() as f64),
        );
        println!(
            "- job type limit: `rate = \"3/s\"` per host (burst 1); the simulated API admits \
             {PARTNER_RATE} calls/s per host with a burst of {PARTNER_BURST}, a call takes 20 ms, \
             a refusal answers `Retry-After` in whole seconds"
        );
        println!(
            "- {} workers × {} slots, each with its own RabbitMQ connection and Redis store \
             connection; prefetch {} per worker; `CooldownLayer` by host",
            self.workers,
            self.slots,
            self.prefetch(),
        );
        let modes: Vec<String> = self.modes.iter().map(Mode::to_string).collect();
        println!("- modes: {}; run `{run}`\n", modes.join(", "));
    }
}
