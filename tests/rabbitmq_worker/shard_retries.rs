//! A sharded quorum queue on the real broker: a retried job comes back to
//! the shard it was taken from, through that shard's own hold, and a job
//! published to the lane by a producer that does not shard comes back to
//! the lane.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use queuey::job::Envelope;
use queuey::prelude::*;
use queuey::queue::QueueType;
use queuey::retry::{Backoff, RetryPolicy};
use queuey::shard::{shard_for_key, shard_name};
use serde::{Deserialize, Serialize};

use crate::scenario::{backend, unique_name, wait_for};
use crate::support::within;

const SHARDS: u16 = 4;
/// Every job fails its first attempt and waits this long in a hold.
const HOLD: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShardedQueues {
    Work,
}

impl queuey::Queues for ShardedQueues {
    const ALL: &'static [Self] = &[ShardedQueues::Work];

    fn name(&self) -> &'static str {
        static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
        NAME.get_or_init(|| unique_name("shards"))
    }

    fn config(&self) -> queuey::queue::QueueConfig {
        let retry = RetryPolicy::new(2, Backoff::fixed(HOLD).expect("a fixed backoff"))
            .expect("a retry policy");
        queuey::queue::QueueConfig::new(self.name())
            .queue_type(QueueType::Quorum)
            .shards(SHARDS)
            .retry(retry)
    }
}

/// A job with or without a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ShardJob {
    n: u32,
    customer: Option<String>,
}

impl queuey::Job for ShardJob {
    type Queues = ShardedQueues;
    type Output = ();
    const QUEUE: ShardedQueues = ShardedQueues::Work;
    const NAME: &'static str = "shard_job";

    fn key(&self) -> Option<String> {
        self.customer.clone()
    }
}

/// Each attempt a handler saw, by job number: (attempt, shard, when).
type Attempts = Arc<Mutex<BTreeMap<u32, Vec<(u32, Option<u16>, Instant)>>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_job_comes_back_to_its_own_shard_through_that_shards_hold() {
    let broker = broker!("a_retried_job_comes_back_to_its_own_shard_through_that_shards_hold");
    let q = ShardedQueues::Work.name();
    // The lane, and with it every shard and their companions (`{q}.…`,
    // quorum holds included), is deleted when the test ends.
    broker.track(q);
    let options =
        queuey::rabbitmq::RabbitMqOptions::default().retry_granularity(Duration::from_millis(100));
    let backend = backend(&broker, "shards", options).await;

    let attempts: Attempts = Arc::default();
    let log = Arc::clone(&attempts);
    let worker = Worker::<ShardedQueues, _>::builder(backend.clone())
        .concurrency(8)
        .handler(handler_fn(move |job: ShardJob, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                assert_eq!(ctx.queue(), ShardedQueues::Work.name());
                log.lock().unwrap().entry(job.n).or_default().push((
                    ctx.attempt(),
                    ctx.shard(),
                    Instant::now(),
                ));
                match ctx.attempt() {
                    1 => Err(JobError::retryable("the first attempt fails")),
                    _ => Ok(()),
                }
            }
        }))
        .build()
        .await
        .expect("the worker is built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    // Eight keyed jobs, eight without a key (in turn over the shards), and
    // one published to the lane by a producer that does not shard.
    let producer = Producer::<ShardedQueues, _>::new(backend.clone())
        .await
        .expect("the lane and the shards are declared");
    let mut expected = BTreeMap::new();
    for n in 0..16 {
        let customer = (n % 2 == 0).then(|| format!("customer-{n}"));
        let shard = customer.as_deref().map(|c| shard_for_key(c, SHARDS));
        expected.insert(n, shard);
        let job = ShardJob { n, customer };
        within("enqueue", producer.enqueue(&job)).await.unwrap();
    }
    let lane_job = 100;
    let payload = serde_json::value::to_raw_value(&ShardJob {
        n: lane_job,
        customer: None,
    })
    .unwrap();
    let envelope = Envelope::new(<ShardJob as Job>::NAME, q, payload);
    let properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_message_id(envelope.job_id.to_string().into());
    broker
        .publish_raw(q, &envelope.encode().unwrap(), properties)
        .await;

    let jobs = expected.len() + 1;
    wait_for("every job's second attempt", || {
        let seen = attempts.lock().unwrap();
        seen.len() == jobs && seen.values().all(|a| a.iter().any(|(n, ..)| *n == 2))
    })
    .await;
    handle.shutdown();
    within("the worker stops", running)
        .await
        .unwrap()
        .expect("Worker::run");

    let attempts = attempts.lock().unwrap().clone();
    let mut unkeyed_shards = BTreeSet::new();
    let mut holds = BTreeSet::new();
    for (n, seen) in &attempts {
        let first = seen.iter().find(|a| a.0 == 1).expect("a first attempt");
        let second = seen.iter().find(|a| a.0 == 2).expect("a second attempt");
        assert_eq!(
            first.1, second.1,
            "job {n} came back to another queue than its own: {seen:?}"
        );
        assert!(
            second.2.duration_since(first.2) >= HOLD,
            "job {n} came back before its hold ran out: {seen:?}"
        );
        match (*n, expected.get(n).copied().flatten()) {
            (n, _) if n == lane_job => assert_eq!(first.1, None, "the lane job: {seen:?}"),
            (_, Some(shard)) => assert_eq!(first.1, Some(shard), "keyed job {n}: {seen:?}"),
            (_, None) => {
                let shard = first.1.expect("an unkeyed job comes from a shard");
                unkeyed_shards.insert(shard);
            }
        }
        holds.insert(first.1);
    }
    assert_eq!(
        unkeyed_shards,
        (0..SHARDS).collect::<BTreeSet<_>>(),
        "jobs without a key go to every shard in turn"
    );

    // Each retry went through the hold of its own queue, which
    // dead-letters back to that queue.
    for shard in holds {
        let own = shard.map_or_else(|| q.to_owned(), |s| shard_name(q, s));
        let hold = broker.hold(&own, HOLD.as_millis() as u64);
        let listed = broker
            .listed(&hold)
            .await
            .unwrap_or_else(|| panic!("the hold `{hold}` of `{own}` was used"));
        assert!(
            listed.contains(&format!("\"{own}\"")),
            "`{hold}` dead-letters back to `{own}`: {listed}"
        );
    }
    // Nothing left anywhere, nothing dead-lettered.
    for own in std::iter::once(q.to_owned()).chain((0..SHARDS).map(|s| shard_name(q, s))) {
        assert_eq!(broker.ready_and_unacked(&own).await, Some((0, 0)), "{own}");
        let dead = format!("{own}.dead");
        assert_eq!(
            broker.ready_and_unacked(&dead).await,
            Some((0, 0)),
            "{dead}"
        );
    }
    backend.close().await.unwrap();
}
