//! What the parent and a side agree on: the row a child process runs, the
//! settings it runs with, what it measured, and what a system promises on
//! each row.

use serde::{Deserialize, Serialize};

/// Any error of a side or of the harness; it ends the child run with its
/// message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One measurement a side runs in a child process of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Row {
    /// Enqueue throughput: concurrent producers in a closed loop on the
    /// system's durable path, nothing consuming.
    Enqueue,
    /// Completions per second: a worker runs a backlog enqueued beforehand.
    Completions,
    /// Enqueue→handler start under an open-loop offered rate.
    Latency,
    /// Each job fails once and comes back after the retry delay.
    Retry,
    /// Peak resident memory with many large jobs in flight in the worker.
    Memory,
}

/// What one child run is asked to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// Jobs in this run.
    pub jobs: usize,
    /// Concurrent producers (the Enqueue row: 64).
    pub producers: usize,
    /// Worker job slots (100; the Memory row: as many as its jobs).
    pub slots: usize,
    /// Padding in each job's payload, in bytes (100; the Memory row: 20,000).
    pub payload_bytes: usize,
    /// The Latency row: offered jobs per second.
    pub rate: Option<f64>,
    /// The Retry row: the delay before the second attempt, in milliseconds
    /// (1,000).
    pub retry_delay_ms: u64,
    /// The RabbitMQ broker.
    pub amqp_url: String,
    /// The private redis-server of this variant.
    pub redis_url: String,
    /// A fresh database of the shared PostgreSQL server, made and dropped by
    /// the parent.
    pub postgres_url: String,
}

/// What a child run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Outcome {
    /// Jobs that completed the row's work.
    pub jobs: u64,
    /// Wall time of the measured part, in seconds.
    pub elapsed_secs: f64,
    /// The Latency row: per job, enqueue due (its scheduled instant) → handler started, in µs.
    pub latencies_us: Vec<u64>,
    /// The Retry row: per job, second start − (failure + delay), in µs (0 if
    /// early).
    pub lateness_us: Vec<u64>,
    /// The Retry row: second starts before failure + delay.
    pub early: u64,
    /// The Memory row: the child's peak resident set, in KiB.
    pub peak_rss_kib: Option<u64>,
}

impl Outcome {
    /// The Enqueue row's outcome: `jobs` enqueued in `elapsed`.
    pub fn enqueued(jobs: usize, elapsed: std::time::Duration) -> Outcome {
        Outcome {
            jobs: jobs as u64,
            elapsed_secs: elapsed.as_secs_f64(),
            ..Outcome::default()
        }
    }
}

/// Whether a system runs a row, and what its durable path promises there.
#[derive(Clone, Copy, Debug)]
pub enum Promise {
    /// It runs the row; the words say what it promises (e.g. "publisher
    /// confirm, persistent message, durable queue").
    Runs(&'static str),
    /// It cannot; the words say why (e.g. "no broker-side delay: the retry
    /// waits in worker memory").
    Lacks(&'static str),
}
