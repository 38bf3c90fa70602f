//! The benchmark's queue set and its job.
//!
//! Queue names in queuey are static (a queue set is a type), but each mode
//! runs on a fresh queue, so this set is written by hand and reads its
//! name from [`NAME`], which [`use_queue`] sets before a mode builds its
//! producer and workers (the modes run one after the other).

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use queuey::queue::QueueConfig;
use queuey::{Job, Queues};
use serde::{Deserialize, Serialize};

/// The queue set: one work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PacingQueues {
    Work,
}

/// The current mode's queue name.
static NAME: RwLock<&'static str> = RwLock::new("queuey-bench-pacing.unset");
/// Each worker's prefetch.
static PREFETCH: AtomicU16 = AtomicU16::new(1);

impl Queues for PacingQueues {
    const ALL: &'static [Self] = &[PacingQueues::Work];

    fn name(&self) -> &'static str {
        *NAME.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn config(&self) -> QueueConfig {
        QueueConfig::new(self.name()).prefetch(PREFETCH.load(Ordering::Relaxed))
    }
}

/// Makes `name` the queue of what is built from now on, each worker
/// taking `prefetch` jobs at a time. The name is kept for the rest of the
/// process (one per mode).
pub(crate) fn use_queue(name: &str, prefetch: u16) {
    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
    *NAME.write().unwrap_or_else(PoisonError::into_inner) = name;
    PREFETCH.store(prefetch, Ordering::Relaxed);
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A call to the partner API for one host. The job type declares the
/// partner's rate, 3 calls a second per host: the workers keep it in their
/// limit store, and a producer given that store books each job's turn.
#[derive(Job, Serialize, Deserialize, Clone, Debug)]
#[job(
    queue = PacingQueues::Work,
    name = "bench_pacing_call",
    limit(key = host, rate = "3/s"),
)]
pub(crate) struct PartnerCall {
    /// The host called: the limit's key.
    pub(crate) host: String,
    /// The host's number, for the benchmark's counts.
    pub(crate) host_no: usize,
    /// [`now_micros`] just before the enqueue.
    pub(crate) sent_us: u64,
}

impl PartnerCall {
    /// A call for host number `host_no`, stamped now.
    pub(crate) fn new(host_no: usize) -> PartnerCall {
        PartnerCall {
            host: host_name(host_no),
            host_no,
            sent_us: now_micros(),
        }
    }
}

/// The name of host number `host_no`.
pub(crate) fn host_name(host_no: usize) -> String {
    format!("api-{host_no:03}.partner.example")
}
