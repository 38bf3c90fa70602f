//! The benchmark's queue set: one sharded logical queue whose name, shards
//! and prefetch are fixed once per process (the parent picks them, each
//! worker process reads them from its environment), and the job: a tenant,
//! how long its handler sleeps, and for a timed job the instant it was
//! enqueued.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use queuey::queue::QueueConfig;
use queuey::shard::{shard_for_key, shard_name};
use queuey::{Job, Queues};
use serde::{Deserialize, Serialize};

use crate::BenchResult;

/// The queue set. Queue names in queuey are static (a queue set is a
/// type), but every run needs a fresh queue, so this set is written by
/// hand and reads its name from [`QUEUE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FairQueues {
    Work,
}

/// The run's queue.
#[derive(Debug)]
struct FairQueue {
    name: String,
    shards: u16,
    prefetch: u16,
}

static QUEUE: OnceLock<FairQueue> = OnceLock::new();

impl Queues for FairQueues {
    const ALL: &'static [Self] = &[FairQueues::Work];

    fn name(&self) -> &'static str {
        QUEUE
            .get()
            .map_or("queuey-bench-fair.unset", |q| q.name.as_str())
    }

    fn config(&self) -> QueueConfig {
        let (shards, prefetch) = QUEUE.get().map_or((1, 1), |q| (q.shards, q.prefetch));
        QueueConfig::new(self.name())
            .prefetch(prefetch)
            .shards(shards)
    }
}

/// Fixes the run's queue: `name` with `shards` shards and `prefetch` (the
/// logical queue's, split over the lane and the shards).
pub(crate) fn init(name: &str, shards: u16, prefetch: u16) -> BenchResult<()> {
    QUEUE
        .set(FairQueue {
            name: name.to_owned(),
            shards,
            prefetch,
        })
        .map_err(|_| "the queue is set once per process".into())
}

/// A fresh queue name.
pub(crate) fn fresh_name() -> String {
    format!("queuey-bench-fair.{}", uuid::Uuid::new_v4().simple())
}

/// The shard `tenant`'s jobs go to.
pub(crate) fn shard_of(tenant: &str) -> u16 {
    shard_for_key(tenant, QUEUE.get().map_or(1, |q| q.shards))
}

/// The broker queue of `tenant`'s shard.
pub(crate) fn shard_queue(tenant: &str) -> String {
    shard_name(FairQueues::Work.name(), shard_of(tenant))
}

/// The control stream of every backend of the run (the workers follow it
/// and send their heartbeats to it with `.workers`), so that the run
/// leaves no stream behind on the broker.
pub(crate) fn control_stream() -> String {
    format!("{}.control", FairQueues::Work.name())
}

/// Every broker queue the run declares: the lane and each shard, each with
/// its dead-letter and suspect queue, and the two control streams. The
/// jobs never fail or wait, so no hold queue is made.
pub(crate) fn broker_queues() -> Vec<String> {
    let config = FairQueues::Work.config();
    let physical = config.physical();
    let mut queues: Vec<String> = ["", ".dead", ".suspect"]
        .iter()
        .flat_map(|suffix| {
            physical
                .iter()
                .map(move |q| format!("{}{suffix}", q.name()))
        })
        .collect();
    let control = control_stream();
    queues.push(format!("{control}.workers"));
    queues.push(control);
    queues
}

/// Microseconds since the Unix epoch: the clock every process shares.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The job: its tenant picks its shard; its handler sleeps `work_ms`.
#[derive(Job, Serialize, Deserialize, Clone, Debug)]
#[job(queue = FairQueues::Work, name = "bench_fair", tenant = tenant)]
pub(crate) struct FairJob {
    pub(crate) tenant: String,
    pub(crate) work_ms: u64,
    /// Set on a timed job: the worker that starts it reports how long it
    /// waited.
    pub(crate) probe: Option<Probe>,
}

/// A timed job: its trial and when it was enqueued.
#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
pub(crate) struct Probe {
    pub(crate) trial: u32,
    /// [`now_micros`] just before the enqueue.
    pub(crate) sent_us: u64,
}

impl FairJob {
    pub(crate) fn new(tenant: &str, work_ms: u64) -> FairJob {
        FairJob {
            tenant: tenant.to_owned(),
            work_ms,
            probe: None,
        }
    }

    /// A timed job of trial `trial`, stamped now.
    pub(crate) fn timed(tenant: &str, work_ms: u64, trial: u32) -> FairJob {
        FairJob {
            probe: Some(Probe {
                trial,
                sent_us: now_micros(),
            }),
            ..FairJob::new(tenant, work_ms)
        }
    }
}
