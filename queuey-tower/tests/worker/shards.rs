//! A sharded queue end to end on the in-memory backend: jobs spread over
//! the shards (by key, else in turn), one key's jobs in order, retries back
//! to their own shard, the lane served too, and a pause covering them all.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::{
    EnqueueOptions, Envelope, Job, JobContext, JobError, Producer, Queues, handler_fn,
};
use queuey_tower::Worker;
use serde::{Deserialize, Serialize};

use crate::support::{Running, spawn, wait_until};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "sh")]
enum ShardedQueues {
    #[queue(
        shards = 4,
        prefetch = 16,
        retry(max_attempts = 3, backoff = "fixed", delay = "1s")
    )]
    Orders,
}

/// A job keyed by its customer; `fail_once` fails its first attempt.
#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = ShardedQueues::Orders, name = "order", key = customer)]
struct Order {
    customer: String,
    seq: u32,
    fail_once: bool,
}

/// A job of the same queue without a key.
#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = ShardedQueues::Orders, name = "ping")]
struct Ping {
    n: u32,
}

/// What a handler saw of one call: (customer or "", seq, shard, attempt).
type Calls = Arc<Mutex<Vec<(String, u32, Option<u16>, u32)>>>;

async fn worker(backend: &Arc<MemoryBackend>, concurrency: usize) -> (Calls, Running) {
    let calls: Calls = Arc::default();
    let (orders, pings) = (Arc::clone(&calls), Arc::clone(&calls));
    let worker = Worker::<ShardedQueues, _>::builder(backend.clone())
        .concurrency(concurrency)
        .handler(handler_fn(move |job: Order, ctx: JobContext| {
            let calls = Arc::clone(&orders);
            async move {
                assert_eq!(
                    ctx.queue(),
                    "sh.orders",
                    "the handler sees the logical queue"
                );
                calls
                    .lock()
                    .unwrap()
                    .push((job.customer, job.seq, ctx.shard(), ctx.attempt()));
                match job.fail_once && ctx.attempt() == 1 {
                    true => Err(JobError::retryable("first try fails")),
                    false => Ok(()),
                }
            }
        }))
        .handler(handler_fn(move |job: Ping, ctx: JobContext| {
            let calls = Arc::clone(&pings);
            async move {
                calls
                    .lock()
                    .unwrap()
                    .push((String::new(), job.n, ctx.shard(), ctx.attempt()));
                Ok::<_, JobError>(())
            }
        }))
        .build()
        .await
        .expect("the worker is built");
    assert_eq!(worker.queues().collect::<Vec<_>>(), ["sh.orders"]);
    (calls, spawn(worker))
}

fn shard_queues() -> Vec<String> {
    (0..4).map(|i| format!("sh.orders.s{i}")).collect()
}

#[tokio::test(start_paused = true)]
async fn keyed_jobs_keep_their_shard_and_their_order() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<ShardedQueues, _>::new(backend.clone())
        .await
        .unwrap();
    // The lane and every shard exist, each with its dead-letter store.
    assert!(backend.is_declared("sh.orders"));
    for shard in shard_queues() {
        assert!(backend.is_declared(&shard), "{shard}");
    }
    let customers: Vec<String> = (0..12).map(|c| format!("customer-{c}")).collect();
    for seq in 0..20 {
        for customer in &customers {
            let order = Order {
                customer: customer.clone(),
                seq,
                fail_once: false,
            };
            producer.enqueue(&order).await.unwrap();
        }
    }
    // Nothing on the lane; every shard got some customers' jobs.
    assert_eq!(backend.ready_count("sh.orders"), 0);
    let per_shard: Vec<usize> = shard_queues()
        .iter()
        .map(|q| backend.ready_count(q))
        .collect();
    assert_eq!(per_shard.iter().sum::<usize>(), 240);
    assert!(per_shard.iter().all(|&n| n > 0), "{per_shard:?}");

    // One job at a time: the start order is the delivery order.
    let (calls, running) = worker(&backend, 1).await;
    wait_until(|| running.handle.jobs_settled() == 240).await;
    running.stop().await;

    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 240, "every job once");
    let mut by_customer: BTreeMap<&str, Vec<(u32, Option<u16>)>> = BTreeMap::new();
    for (customer, seq, shard, _) in &calls {
        by_customer
            .entry(customer)
            .or_default()
            .push((*seq, *shard));
    }
    for (customer, seen) in by_customer {
        let seqs: Vec<u32> = seen.iter().map(|s| s.0).collect();
        assert_eq!(
            seqs,
            (0..20).collect::<Vec<_>>(),
            "{customer}'s jobs in order"
        );
        let shards: BTreeSet<Option<u16>> = seen.iter().map(|s| s.1).collect();
        let expected = queuey_core::shard::shard_for_key(customer, 4);
        assert_eq!(
            shards,
            BTreeSet::from([Some(expected)]),
            "{customer} on one shard"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn jobs_without_a_key_go_round_robin_and_retries_return_to_their_shard() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<ShardedQueues, _>::new(backend.clone())
        .await
        .unwrap();
    for n in 0..40 {
        producer.enqueue(&Ping { n }).await.unwrap();
    }
    let per_shard: Vec<usize> = shard_queues()
        .iter()
        .map(|q| backend.ready_count(q))
        .collect();
    assert_eq!(per_shard, [10, 10, 10, 10]);
    // A key given at enqueue time wins over the job's own.
    let options = EnqueueOptions::default().key("customer-1");
    for seq in 0..8 {
        let order = Order {
            customer: format!("other-{seq}"),
            seq,
            fail_once: true,
        };
        producer
            .enqueue_with(&order, options.clone())
            .await
            .unwrap();
    }
    let keyed = usize::from(queuey_core::shard::shard_for_key("customer-1", 4));
    assert_eq!(backend.ready_count(&shard_queues()[keyed]), 18);

    let (calls, running) = worker(&backend, 8).await;
    // 40 pings, and 8 orders twice (the first attempt fails).
    wait_until(|| running.handle.jobs_settled() == 56).await;
    running.stop().await;
    let calls = calls.lock().unwrap().clone();
    let orders: Vec<_> = calls.iter().filter(|c| !c.0.is_empty()).collect();
    assert_eq!(orders.len(), 16);
    for (_, _, shard, attempt) in &orders {
        assert_eq!(
            *shard,
            Some(keyed as u16),
            "attempt {attempt} on the key's shard"
        );
    }
    let pings_per_shard = calls.iter().filter(|c| c.0.is_empty()).fold(
        BTreeMap::<Option<u16>, usize>::new(),
        |mut counts, c| {
            *counts.entry(c.2).or_default() += 1;
            counts
        },
    );
    assert_eq!(
        pings_per_shard.values().copied().collect::<Vec<_>>(),
        [10, 10, 10, 10]
    );
    for shard in shard_queues() {
        assert!(backend.dead_letters(&shard).is_empty(), "{shard}");
        assert_eq!(backend.held_count(&shard), 0, "{shard}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_job_is_dead_lettered_from_its_own_shard() {
    #[derive(Job, Debug, Clone, Serialize, Deserialize)]
    #[job(queue = ShardedQueues::Orders, name = "doomed", key = Self::shard_key)]
    struct Doomed {
        id: u32,
    }
    impl Doomed {
        fn shard_key(&self) -> String {
            format!("doomed-{}", self.id)
        }
    }
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<ShardedQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let worker = Worker::<ShardedQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: Doomed, _: JobContext| async {
            Err::<(), _>(JobError::retryable("always"))
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    producer.enqueue(&Doomed { id: 7 }).await.unwrap();
    wait_until(|| running.handle.jobs_settled() == 3).await;
    running.stop().await;
    let shard = queuey_core::shard::shard_for_key("doomed-7", 4);
    let dead = backend.dead_letters(&format!("sh.orders.s{shard}"));
    assert_eq!(dead.len(), 1, "dead-lettered once, from its shard");
    assert_eq!(dead[0].original_queue, format!("sh.orders.s{shard}"));
}

#[tokio::test(start_paused = true)]
async fn the_lane_is_served_and_a_pause_covers_every_shard() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<ShardedQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let (calls, running) = worker(&backend, 4).await;

    // A producer that does not shard publishes to the queue itself.
    let raw = serde_json::value::to_raw_value(&Ping { n: 999 }).unwrap();
    let envelope = Envelope::new("ping", "sh.orders", raw);
    queuey_core::backend::Backend::publish(&*backend, &envelope)
        .await
        .unwrap();
    wait_until(|| running.handle.jobs_settled() == 1).await;
    assert_eq!(calls.lock().unwrap()[0], (String::new(), 999, None, 1));

    producer.pause(&ShardedQueues::Orders).await.unwrap();
    wait_until(|| running.handle.paused_queues() == ["sh.orders"]).await;
    for n in 0..8 {
        producer.enqueue(&Ping { n }).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        running.handle.jobs_settled(),
        1,
        "no shard is consumed while paused"
    );

    producer.resume(&ShardedQueues::Orders).await.unwrap();
    wait_until(|| running.handle.jobs_settled() == 9).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn workers_taking_part_of_the_shards_share_the_queue() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<ShardedQueues, _>::new(backend.clone())
        .await
        .unwrap();
    for n in 0..40 {
        producer.enqueue(&Ping { n }).await.unwrap();
    }
    let mut runs = Vec::new();
    for part in [[0u16, 1], [2, 3]] {
        let seen: Arc<Mutex<Vec<Option<u16>>>> = Arc::default();
        let log = Arc::clone(&seen);
        let worker = Worker::<ShardedQueues, _>::builder(backend.clone())
            .only_shards(ShardedQueues::Orders, part)
            .handler(handler_fn(move |_: Ping, ctx: JobContext| {
                log.lock().unwrap().push(ctx.shard());
                async { Ok::<_, JobError>(()) }
            }))
            .build()
            .await
            .unwrap();
        runs.push((part, seen, spawn(worker)));
    }
    wait_until(|| runs.iter().map(|r| r.2.handle.jobs_settled()).sum::<u64>() == 40).await;
    for (part, seen, running) in runs {
        running.stop().await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 20, "{part:?}");
        assert!(
            seen.iter()
                .all(|shard| shard.is_some_and(|s| part.contains(&s))),
            "{part:?} took only its shards: {seen:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn shards_to_take_are_checked_when_the_worker_is_built() {
    let backend = Arc::new(MemoryBackend::new());
    let build = |shards: Vec<u16>| {
        Worker::<ShardedQueues, _>::builder(backend.clone())
            .only_shards(ShardedQueues::Orders, shards)
            .handler(handler_fn(|_: Ping, _: JobContext| async {
                Ok::<_, JobError>(())
            }))
            .build()
    };
    let error = build(vec![4]).await.unwrap_err().to_string();
    assert!(error.contains("has shards 0 to 3, not shard 4"), "{error}");
    let error = build(vec![]).await.unwrap_err().to_string();
    assert!(
        error.contains("no shard of queue `sh.orders` given"),
        "{error}"
    );

    let unsharded = |queue: crate::support::TestQueues| {
        Worker::<crate::support::TestQueues, _>::builder(backend.clone())
            .only_shards(queue, [0])
            .handler(handler_fn(|_: crate::support::Task, _: JobContext| async {
                Ok::<_, JobError>(())
            }))
            .build()
    };
    let error = unsharded(crate::support::TestQueues::Work)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("queue `t.work` is not sharded"), "{error}");
    let error = unsharded(crate::support::TestQueues::Single)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("no handler of this worker"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_unique_job_is_unique_across_the_shards() {
    #[derive(Job, Debug, Clone, Serialize, Deserialize)]
    #[job(queue = ShardedQueues::Orders, name = "rebuild", unique(window = "10m"))]
    struct Rebuild {
        tenant: u32,
    }
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<ShardedQueues, _>::builder(backend.clone())
        .store(queuey_core::store::MemoryStore::new())
        .build()
        .await
        .unwrap();
    // Round-robin would put the two on different shards; the key is the
    // queue's, not a shard's.
    producer.enqueue(&Rebuild { tenant: 1 }).await.unwrap();
    let again = producer.enqueue(&Rebuild { tenant: 1 }).await.unwrap_err();
    assert!(
        matches!(again, queuey_core::Error::Duplicate { .. }),
        "{again}"
    );
    producer.enqueue(&Rebuild { tenant: 2 }).await.unwrap();
    let queued: usize = shard_queues().iter().map(|q| backend.ready_count(q)).sum();
    assert_eq!(queued, 2);
}
