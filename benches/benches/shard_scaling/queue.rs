//! The benchmark's queue set: one logical quorum queue, given a fresh name
//! and its number of shards before every run, and a 200-byte job without a
//! key (so jobs go to the shards in turn).

use std::sync::RwLock;

use queuey::queue::{QueueConfig, QueueType};
use queuey::{Job, Queues};
use serde::{Deserialize, Serialize};

/// The queue set. Queue names in queuey are static (a queue set is a
/// type), but every run needs a queue of its own, so this set is written
/// by hand and reads its name and shards from [`CURRENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScaleQueues {
    Work,
}

/// The queue of the current run.
#[derive(Debug, Clone, Copy)]
struct CurrentQueue {
    name: &'static str,
    shards: u16,
    prefetch: u16,
}

static CURRENT: RwLock<CurrentQueue> = RwLock::new(CurrentQueue {
    name: "queuey-bench-shards.unset",
    shards: 1,
    prefetch: 1,
});

impl Queues for ScaleQueues {
    const ALL: &'static [Self] = &[ScaleQueues::Work];

    fn name(&self) -> &'static str {
        current().name
    }

    fn config(&self) -> QueueConfig {
        let queue = current();
        QueueConfig::new(queue.name)
            .queue_type(QueueType::Quorum)
            .prefetch(queue.prefetch)
            .shards(queue.shards)
    }
}

fn current() -> CurrentQueue {
    *CURRENT.read().unwrap_or_else(|p| p.into_inner())
}

/// Points [`ScaleQueues::Work`] at a fresh queue of `shards` shards (1: an
/// unsharded queue) and returns its name. The name is leaked: a `Queues`
/// name lives for the whole program, and a run makes a few dozen.
pub(crate) fn fresh(shards: u16, prefetch: u16) -> &'static str {
    let name = format!("queuey-bench-shards.{}", uuid::Uuid::new_v4().simple());
    let name: &'static str = Box::leak(name.into_boxed_str());
    *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = CurrentQueue {
        name,
        shards,
        prefetch,
    };
    name
}

/// Every broker queue the current queue declares: the queue (or the lane
/// and the shards), each with its dead-letter and suspect queue.
pub(crate) fn broker_queues() -> Vec<String> {
    ScaleQueues::Work
        .config()
        .physical()
        .iter()
        .flat_map(|q| {
            let name = q.name();
            [
                name.to_owned(),
                format!("{name}.dead"),
                format!("{name}.suspect"),
            ]
        })
        .collect()
}

/// The job: a body that makes its JSON payload 200 bytes long.
#[derive(Job, Serialize, Deserialize, Clone)]
#[job(queue = ScaleQueues::Work, name = "bench_shard_noop")]
pub(crate) struct ScaleJob {
    body: String,
}

impl ScaleJob {
    pub(crate) fn new() -> ScaleJob {
        // `{"body":""}` is 11 bytes.
        ScaleJob {
            body: "x".repeat(200 - 11),
        }
    }
}
