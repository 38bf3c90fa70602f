//! A sharded quorum queue on the real broker: its lane and shards declared
//! (the shards' leaders placed by the broker's balanced locator), one key's
//! jobs in order, every job handled, and a queue resharded from one queue
//! to four shards while jobs flow, with none lost.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use queuey::prelude::*;
use queuey::queue::{QueueConfig, QueueType};
use queuey::retry::{Backoff, RetryPolicy};
use queuey::worker::WorkerHandle;
use serde::{Deserialize, Serialize};

use crate::scenario::{backend, unique_name, wait_for};

/// A queue set with one queue named `$name()`, configured by `$config`, and
/// a job type `$job` on it keyed by its `key` field.
macro_rules! keyed_set {
    ($queues:ident, $job:ident, $name:expr, $config:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum $queues {
            Work,
        }

        impl Queues for $queues {
            const ALL: &'static [Self] = &[$queues::Work];

            fn name(&self) -> &'static str {
                $name()
            }

            fn config(&self) -> QueueConfig {
                let config: fn(QueueConfig) -> QueueConfig = $config;
                config(QueueConfig::new(self.name()))
            }
        }

        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        struct $job {
            key: String,
            seq: u32,
        }

        impl Job for $job {
            type Queues = $queues;
            type Output = ();
            const QUEUE: $queues = $queues::Work;
            const NAME: &'static str = "keyed";

            fn key(&self) -> Option<String> {
                Some(self.key.clone())
            }
        }
    };
}

fn ordered_name() -> &'static str {
    static NAME: OnceLock<&'static str> = OnceLock::new();
    NAME.get_or_init(|| unique_name("sharded"))
}

keyed_set!(OrderedQueues, Ordered, ordered_name, |q| q
    .queue_type(QueueType::Quorum)
    .prefetch(8)
    .shards(4));

/// What handlers saw: (key, seq, shard).
type Seen = Arc<Mutex<Vec<(String, u32, Option<u16>)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_keys_jobs_keep_their_shard_and_their_order() {
    let broker = broker!("one_keys_jobs_keep_their_shard_and_their_order");
    let lane = ordered_name();
    broker.track(lane);
    let backend = backend(&broker, "sharded", RabbitMqOptions::default()).await;
    let producer = Producer::<OrderedQueues, _>::new(backend.clone())
        .await
        .expect("the lane and the shards are declared");
    // Quorum shards ask the broker to balance their leaders; the lane is
    // declared as an unsharded queue of the same name would be.
    for shard in 0..4 {
        let listed = broker
            .listed(&format!("{lane}.s{shard}"))
            .await
            .expect("the shard is declared");
        assert!(listed.contains("quorum"), "{listed}");
        assert!(listed.contains("x-queue-leader-locator"), "{listed}");
    }
    let listed = broker.listed(lane).await.expect("the lane is declared");
    assert!(!listed.contains("x-queue-leader-locator"), "{listed}");

    // Twelve keys, twenty jobs each, every key enqueued in order by a task
    // of its own.
    let keys: Vec<String> = (0..12).map(|k| format!("customer-{k}")).collect();
    let mut enqueues = tokio::task::JoinSet::new();
    for key in keys.clone() {
        let producer = producer.clone();
        enqueues.spawn(async move {
            for seq in 0..20 {
                let job = Ordered {
                    key: key.clone(),
                    seq,
                };
                producer.enqueue(&job).await.expect("enqueued");
            }
        });
    }
    while let Some(done) = enqueues.join_next().await {
        done.expect("an enqueue task");
    }
    let mut on_shards = 0;
    for shard in 0..4 {
        on_shards += broker.ready(&format!("{lane}.s{shard}")).await;
    }
    assert_eq!(on_shards, 240, "every job on a shard");
    assert_eq!(broker.ready(lane).await, 0, "none on the lane");

    // One job at a time: the order jobs start in is the order they came.
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let worker = Worker::<OrderedQueues, _>::builder(backend.clone())
        .concurrency(1)
        .handler(handler_fn(move |job: Ordered, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((job.key, job.seq, ctx.shard()));
                Ok::<_, JobError>(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    wait_for("every job", || handle.jobs_settled() == 240).await;
    handle.shutdown();
    running.await.unwrap().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 240, "each job once");
    let mut by_key: BTreeMap<&str, Vec<(u32, Option<u16>)>> = BTreeMap::new();
    for (key, seq, shard) in &seen {
        by_key.entry(key).or_default().push((*seq, *shard));
    }
    let mut shards_used = BTreeSet::new();
    for (key, jobs) in by_key {
        let seqs: Vec<u32> = jobs.iter().map(|j| j.0).collect();
        assert_eq!(seqs, (0..20).collect::<Vec<_>>(), "{key}'s jobs in order");
        let expected = queuey::shard::shard_for_key(key, 4);
        assert!(
            jobs.iter().all(|j| j.1 == Some(expected)),
            "{key}'s jobs all on shard {expected}: {jobs:?}"
        );
        shards_used.insert(expected);
    }
    assert!(shards_used.len() >= 3, "keys spread: {shards_used:?}");
}

fn resharded_name() -> &'static str {
    static NAME: OnceLock<&'static str> = OnceLock::new();
    NAME.get_or_init(|| unique_name("reshard"))
}

// The same queue, before and after: one quorum queue, then four shards
// (the queue itself stays, as the sharded queue's lane).
keyed_set!(BeforeQueues, Before, resharded_name, |q| q
    .queue_type(QueueType::Quorum)
    .prefetch(16)
    .retry(policy()));
keyed_set!(AfterQueues, After, resharded_name, |q| q
    .queue_type(QueueType::Quorum)
    .prefetch(16)
    .retry(policy())
    .shards(4));

/// Three attempts, 300 ms apart.
fn policy() -> RetryPolicy {
    let backoff = Backoff::fixed(Duration::from_millis(300)).expect("a valid delay");
    RetryPolicy::new(3, backoff).expect("a valid policy")
}

/// Jobs handled, by (key, seq), with how often.
type Handled = Arc<Mutex<BTreeMap<(String, u32), u32>>>;

/// Records each job; a job whose seq is a multiple of 5 fails its first
/// attempt, so some jobs wait in hold queues while the queue is resharded.
fn record(handled: &Handled, key: String, seq: u32, ctx: &JobContext) -> Result<(), JobError> {
    if seq.is_multiple_of(5) && ctx.attempt() == 1 {
        return Err(JobError::retryable("fails once"));
    }
    *handled.lock().unwrap().entry((key, seq)).or_default() += 1;
    Ok(())
}

/// A worker of `Q` that records each job (see [`record`]) and counts in
/// `from_lane` the jobs it took from outside the shards: the lane of a
/// sharded queue, or the whole of an unsharded one.
async fn start_worker<Q: Queues, J: Job<Queues = Q, Output = ()>>(
    backend: &Arc<RabbitMqBackend>,
    handled: &Handled,
    from_lane: &Arc<AtomicU32>,
    parts: fn(J) -> (String, u32),
) -> WorkerHandle {
    let handled = Arc::clone(handled);
    let from_lane = Arc::clone(from_lane);
    let worker = Worker::<Q, _>::builder(backend.clone())
        .handler(handler_fn(move |job: J, ctx: JobContext| {
            if ctx.shard().is_none() {
                from_lane.fetch_add(1, Ordering::Relaxed);
            }
            let (key, seq) = parts(job);
            let outcome = record(&handled, key, seq, &ctx);
            async move { outcome }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    tokio::spawn(worker.run());
    handle
}

/// Enqueues jobs of `key`, seq 0, 1, … until `stop`, and returns the key
/// with how many it enqueued.
async fn keep_enqueueing<Q: Queues, J: Job<Queues = Q>>(
    producer: Producer<Q, Arc<RabbitMqBackend>>,
    key: String,
    make: fn(String, u32) -> J,
    stop: Arc<AtomicBool>,
) -> (String, u32) {
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        producer
            .enqueue(&make(key.clone(), seq))
            .await
            .expect("enqueued");
        seq += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (key, seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_resharded_from_one_to_four_under_load_loses_nothing() {
    let broker = broker!("a_queue_resharded_from_one_to_four_under_load_loses_nothing");
    let queue = resharded_name();
    broker.track(queue);
    let backend = backend(
        &broker,
        "reshard",
        RabbitMqOptions::default().retry_granularity(Duration::from_millis(100)),
    )
    .await;
    let handled: Handled = Arc::default();

    // Before: one queue, its producers and a worker.
    let before = Producer::<BeforeQueues, _>::new(backend.clone())
        .await
        .expect("declared");
    let old_worker = start_worker(&backend, &handled, &Arc::default(), |job: Before| {
        (job.key, job.seq)
    })
    .await;
    let stop_old = Arc::new(AtomicBool::new(false));
    let mut old_producers = tokio::task::JoinSet::new();
    for task in 0..4 {
        old_producers.spawn(keep_enqueueing(
            before.clone(),
            format!("key-{task}"),
            |key, seq| Before { key, seq },
            Arc::clone(&stop_old),
        ));
    }
    wait_for("jobs flowing on the one queue", || {
        old_worker.jobs_settled() >= 100
    })
    .await;

    // The documented order: workers of the sharded queue first (they
    // consume the queue itself as the lane, and its holds keep returning
    // there), then producers of the sharded queue, then the old ones go.
    let from_lane = Arc::new(AtomicU32::new(0));
    let new_worker = start_worker(&backend, &handled, &from_lane, |job: After| {
        (job.key, job.seq)
    })
    .await;
    let after = Producer::<AfterQueues, _>::new(backend.clone())
        .await
        .expect("the shards are declared beside the queue");
    let stop_new = Arc::new(AtomicBool::new(false));
    let mut new_producers = tokio::task::JoinSet::new();
    for task in 0..4 {
        new_producers.spawn(keep_enqueueing(
            after.clone(),
            format!("key-{}", task + 4),
            |key, seq| After { key, seq },
            Arc::clone(&stop_new),
        ));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_old.store(true, Ordering::Relaxed);
    let mut enqueued: BTreeSet<(String, u32)> = BTreeSet::new();
    while let Some(done) = old_producers.join_next().await {
        let (key, count) = done.expect("an old producer");
        enqueued.extend((0..count).map(|seq| (key.clone(), seq)));
    }
    old_worker.shutdown();
    // The new producers go on alone for a while.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_new.store(true, Ordering::Relaxed);
    let mut new_jobs = 0;
    while let Some(done) = new_producers.join_next().await {
        let (key, count) = done.expect("a new producer");
        assert!(count > 0, "{key} enqueued nothing");
        new_jobs += count;
        enqueued.extend((0..count).map(|seq| (key.clone(), seq)));
    }
    assert!(new_jobs > 0);
    // Every fifth job is retried once through a hold: on a loaded machine
    // the last retries can take a while to come back, so the bound is
    // generous (nothing here is about speed).
    let all_handled = tokio::time::timeout(Duration::from_secs(90), async {
        while handled.lock().unwrap().len() < enqueued.len() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if all_handled.is_err() {
        let seen: BTreeSet<(String, u32)> = handled.lock().unwrap().keys().cloned().collect();
        let missing: Vec<_> = enqueued.difference(&seen).take(20).collect();
        panic!(
            "{} of {} jobs not handled after 90 s (ready on the lane: {}); the first missing: \
             {missing:?}",
            enqueued.len() - seen.len(),
            enqueued.len(),
            broker.ready(queue).await
        );
    }
    new_worker.shutdown();

    // Nothing lost, nothing made up: every job of every producer, handled.
    let handled: BTreeSet<(String, u32)> = handled.lock().unwrap().keys().cloned().collect();
    assert_eq!(handled, enqueued);
    // The new worker took the old queue's jobs too (its retries, at least,
    // came back there after the old worker stopped), and drained it.
    assert!(from_lane.load(Ordering::Relaxed) > 0);
    assert_eq!(broker.ready(queue).await, 0);
}
