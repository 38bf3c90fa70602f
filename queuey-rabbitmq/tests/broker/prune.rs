//! Pruning quorum hold queues: an empty, unused hold is deleted; one with
//! jobs, a consumer or a job arriving while it is watched is kept; a
//! publish that meets a hold being pruned waits and loses nothing; pruning
//! and publishing at the same time lose nothing; the backend prunes the
//! holds it stopped using by itself.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::BasicProperties;
use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use queuey_core::backend::Backend;
use queuey_core::{Error, QueueConfig};
use queuey_rabbitmq::{HoldCensus, HoldPruned, RabbitMqOptions};

use crate::support::{BrokerCensus, envelope, n_of, within};

/// Declares `config` through each backend, holds job 1 for `ms` through
/// the last, and waits until it is back on its queue: the hold is then
/// empty and unused.
async fn held_once(
    broker: &crate::support::Broker,
    backends: &[&queuey_rabbitmq::RabbitMqBackend],
    config: &QueueConfig,
    ms: u64,
) {
    for backend in backends {
        within("declare", backend.declare(std::slice::from_ref(config)))
            .await
            .unwrap();
    }
    let last = backends.last().expect("a backend");
    within(
        "publish_after",
        last.publish_after(&envelope(config.name(), 1), Duration::from_millis(ms)),
    )
    .await
    .unwrap();
    broker.wait_ready(config.name(), 1).await;
}

/// A prune of an empty hold watches it for ten seconds first; this bounds
/// one prune with room for a loaded machine.
const PRUNE_BOUND: Duration = Duration::from_secs(60);

async fn bounded<T>(what: &str, bound: Duration, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(bound, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {bound:?}: {what}"),
    }
}

/// Options whose holds are exactly as long as asked (1 ms steps).
fn exact() -> RabbitMqOptions {
    RabbitMqOptions::default()
        .retry_granularity(Duration::from_millis(1))
        .prune_holds_after(None)
        .hold_census(BrokerCensus)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_unused_hold_is_deleted_and_one_in_use_is_kept() {
    let broker = broker!("an_empty_unused_hold_is_deleted_and_one_in_use_is_kept");
    let backend = broker.backend(exact()).await;
    let q = broker.queue("prune");
    let hold = broker.hold(&q, 1_500);
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();

    // Not a quorum hold of this queue: refused, nothing touched.
    let refused = backend.prune_hold(&q, &format!("{q}.dead")).await;
    assert!(
        matches!(refused, Err(Error::InvalidConfig(_))),
        "{refused:?}"
    );
    assert_eq!(
        within("missing", backend.prune_hold(&q, &hold))
            .await
            .unwrap(),
        HoldPruned::Missing
    );

    // A job waits in it: kept, without waiting for the grace.
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(1_500)),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let kept = within("in use", backend.prune_hold(&q, &hold))
        .await
        .unwrap();
    assert_eq!(kept, HoldPruned::InUse { jobs: 1 });
    assert!(started.elapsed() < Duration::from_secs(5));

    // Once the job is back, the hold is empty and unused: deleted.
    broker.wait_ready(&q, 1).await;
    let pruned = bounded("prune", PRUNE_BOUND, backend.prune_hold(&q, &hold))
        .await
        .unwrap();
    assert_eq!(pruned, HoldPruned::Deleted { rescued: 0 });
    assert!(!broker.exists(&hold).await, "the hold is gone");
    assert_eq!(broker.ready(&q).await, 1, "the job that came back is kept");

    // The next hold declares it again.
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 2), Duration::from_millis(1_500)),
    )
    .await
    .unwrap();
    broker.wait_ready(&q, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumed_hold_is_kept() {
    let broker = broker!("a_consumed_hold_is_kept");
    let backend = broker.backend(exact()).await;
    let q = broker.queue("consumed");
    let hold = broker.hold(&q, 800);
    held_once(&broker, &[&backend], &QueueConfig::new(&q), 800).await;
    let ch = broker.channel().await;
    let _consumer = ch
        .basic_consume(
            hold.as_str().into(),
            "stray".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        within("consumed", backend.prune_hold(&q, &hold))
            .await
            .unwrap(),
        HoldPruned::Consumed { consumers: 1 }
    );
    assert!(broker.exists(&hold).await);
}

/// A job published into the hold while the pruner watches it (by a client
/// that knows nothing of pruning) reaches the pruner, which gives it back
/// and keeps the hold; the job comes back to its queue at its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_arriving_while_the_hold_is_watched_keeps_it() {
    let broker = broker!("a_job_arriving_while_the_hold_is_watched_keeps_it");
    let backend = broker.backend(exact()).await;
    let q = broker.queue("watched");
    let hold = broker.hold(&q, 1_000);
    held_once(&broker, &[&backend], &QueueConfig::new(&q), 1_000).await;

    let pruner = {
        let backend = backend.clone();
        let (q, hold) = (q.clone(), hold.clone());
        tokio::spawn(async move { backend.prune_hold(&q, &hold).await })
    };
    // Wait for the pruner's consumer, then publish as a foreign client.
    within("the pruner consumes", async {
        while !consumed(&hold).await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let body = envelope(&q, 2).encode().unwrap();
    broker
        .publish_raw(
            &hold,
            &body,
            BasicProperties::default().with_delivery_mode(2),
        )
        .await;
    let outcome = bounded("prune", PRUNE_BOUND, pruner)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, HoldPruned::InUse { jobs: 1 });
    assert!(broker.exists(&hold).await, "the hold is kept");
    broker.wait_ready(&q, 2).await;
}

/// Whether `queue` has a consumer, by the broker's listing (which, unlike
/// a declare, does not count as using it).
async fn consumed(queue: &str) -> bool {
    crate::support::listed(queue, &["consumers"])
        .await
        .is_some_and(|row| row[0] != "0")
}

/// A hold publish that meets a hold being pruned steps over it to the hold
/// one millisecond longer, at once: the prune deletes the watched hold, and
/// the job comes back from the other, never early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_publish_steps_over_a_hold_being_pruned() {
    let broker = broker!("a_hold_publish_steps_over_a_hold_being_pruned");
    let pruning = broker.backend_named("pruning", exact()).await;
    let holding = broker.backend_named("holding", exact()).await;
    let q = broker.queue("steps");
    let hold = broker.hold(&q, 700);
    let next = broker.hold(&q, 701);
    held_once(&broker, &[&pruning, &holding], &QueueConfig::new(&q), 700).await;

    let pruner = {
        let (q, hold) = (q.clone(), hold.clone());
        tokio::spawn(async move { pruning.prune_hold(&q, &hold).await })
    };
    within("the pruner consumes", async {
        while !consumed(&hold).await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // The holding backend's declaration reuse window has passed: it
    // declares the hold, sees the pruner's consumer, and steps over it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    within(
        "publish_after during a prune",
        holding.publish_after(&envelope(&q, 2), Duration::from_millis(700)),
    )
    .await
    .unwrap();
    assert!(broker.exists(&next).await, "the job went to `{next}`");
    let outcome = bounded("prune", PRUNE_BOUND, pruner)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, HoldPruned::Deleted { rescued: 0 });
    broker.wait_ready(&q, 2).await;
    assert!(
        started.elapsed() >= Duration::from_millis(701),
        "early: {:?}",
        started.elapsed()
    );
}

/// Jobs held in bursts with quiet spells shorter and longer than a prune's
/// watch, while another backend prunes the hold over and over: the hold is
/// deleted several times, publishes meet holds being watched and deleted
/// ones, and every confirmed job comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_while_holding_loses_no_job() {
    let broker = broker!("pruning_while_holding_loses_no_job");
    let pruning = broker.backend_named("pruning", exact()).await;
    let holding = Arc::new(broker.backend_named("holding", exact()).await);
    let q = broker.queue("race");
    let hold = broker.hold(&q, 300);
    let config = QueueConfig::new(&q).prefetch(100);
    for backend in [&pruning, &*holding] {
        within("declare", backend.declare(std::slice::from_ref(&config)))
            .await
            .unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pruner = {
        let (q, hold, stop) = (q.clone(), hold.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match pruning.prune_hold(&q, &hold).await {
                    Ok(outcome) => outcomes.push(outcome),
                    Err(e) => panic!("prune failed: {e}"),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            outcomes
        })
    };

    // Bursts of 10 jobs over a second, each followed by a quiet spell:
    // those longer than a prune's watch let the hold be deleted (and the
    // next burst meet a deleted hold), the shorter ones end while a prune
    // watches it (the next burst keeps it, or waits for the deletion).
    let mut published = BTreeSet::new();
    let mut n = 0;
    for quiet in [13, 4, 13, 7, 2, 13] {
        let burst: Vec<_> = (0..10)
            .map(|i| {
                n += 1;
                let job = n;
                let holding = Arc::clone(&holding);
                let q = q.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(100 * i)).await;
                    holding
                        .publish_after(&envelope(&q, job), Duration::from_millis(300))
                        .await
                        .map(|()| job)
                }
            })
            .collect();
        for result in bounded("a burst", PRUNE_BOUND, futures::future::join_all(burst)).await {
            published.insert(result.expect("every hold is confirmed"));
        }
        tokio::time::sleep(Duration::from_secs(quiet)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let outcomes = bounded("the pruner stops", PRUNE_BOUND, pruner)
        .await
        .unwrap();

    // Every job is back on the queue.
    let ch = broker.channel().await;
    ch.basic_qos(500, BasicQosOptions { global: false })
        .await
        .unwrap();
    let mut consumer = ch
        .basic_consume(
            q.as_str().into(),
            "count".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut back = BTreeSet::new();
    let mut copies = 0;
    while back.len() < published.len() {
        let Ok(Some(Ok(delivery))) =
            tokio::time::timeout(Duration::from_secs(20), consumer.next()).await
        else {
            break;
        };
        copies += 1;
        back.insert(n_of(
            &queuey_core::Envelope::decode(&delivery.data).unwrap(),
        ));
    }
    let lost: Vec<_> = published.difference(&back).collect();
    eprintln!(
        "{} jobs held, {} came back ({copies} copies); prunes: {outcomes:?}",
        published.len(),
        back.len()
    );
    assert!(lost.is_empty(), "lost jobs: {lost:?}");
    let deleted = outcomes
        .iter()
        .filter(|o| matches!(o, HoldPruned::Deleted { .. }))
        .count();
    assert!(
        deleted >= 2,
        "the hold was pruned {deleted} times: {outcomes:?}"
    );
}

/// The backend prunes a hold it stopped using, and declares it again when
/// it needs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_prunes_the_holds_it_stopped_using() {
    let broker = broker!("the_backend_prunes_the_holds_it_stopped_using");
    let backend = broker
        .backend(exact().prune_holds_after(Some(Duration::from_secs(2))))
        .await;
    let q = broker.queue("idle");
    let hold = broker.hold(&q, 500);
    held_once(&broker, &[&backend], &QueueConfig::new(&q), 500).await;
    assert!(broker.exists(&hold).await);
    bounded("the hold is pruned", PRUNE_BOUND, async {
        while !broker.queues_starting_with(&hold).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 2), Duration::from_millis(500)),
    )
    .await
    .unwrap();
    broker.wait_ready(&q, 2).await;
}

/// Jobs past their delay that wait to be dead-lettered (their work queue
/// is gone) show in no AMQP count: the census keeps the hold, jobs and
/// all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_jobs_wait_to_be_dead_lettered_is_kept() {
    let broker = broker!("a_hold_whose_jobs_wait_to_be_dead_lettered_is_kept");
    let backend = broker.backend(exact()).await;
    let q = broker.queue("stuck");
    let hold = broker.hold(&q, 300);
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(300)),
    )
    .await
    .unwrap();
    broker.delete_raw(&q).await;
    // Past its delay, the job cannot be moved to the missing queue.
    within("the job is stuck", async {
        while BrokerCensus.jobs(&hold).await.unwrap() != Some(1) || broker.ready(&hold).await != 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let kept = bounded("prune", PRUNE_BOUND, backend.prune_hold(&q, &hold))
        .await
        .unwrap();
    assert_eq!(kept, HoldPruned::InUse { jobs: 1 });
    assert!(broker.exists(&hold).await);
    assert_eq!(BrokerCensus.jobs(&hold).await.unwrap(), Some(1));
}

/// With the `management` feature the backend counts a hold's jobs through
/// the management API, and prunes the holds it stopped using with it.
#[cfg(feature = "management")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_management_feature_the_api_counts_the_jobs_of_a_pruned_hold() {
    let broker = broker!("with_the_management_feature_the_api_counts_the_jobs_of_a_pruned_hold");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .retry_granularity(Duration::from_millis(1))
                .prune_holds_after(Some(Duration::from_secs(2))),
        )
        .await;
    let q = broker.queue("default-census");
    let hold = broker.hold(&q, 400);
    held_once(&broker, &[&backend], &QueueConfig::new(&q), 400).await;
    bounded("the hold is pruned", PRUNE_BOUND, async {
        while !broker.queues_starting_with(&hold).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    assert_eq!(broker.ready(&q).await, 1);
}

/// With the `management` feature, a backend whose management API cannot be
/// read (nothing answers where it should be) keeps every hold, and says so
/// once at INFO, without the password.
#[cfg(feature = "management")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_management_api_that_cannot_be_read_keeps_every_hold_and_says_so_once() {
    let broker = broker!("a_management_api_that_cannot_be_read_keeps_every_hold_and_says_so_once");
    let secret = format!("MGMTSECRET{}", std::process::id());
    crate::support::watch_secret(&secret);
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .retry_granularity(Duration::from_millis(1))
                .prune_holds_after(None)
                .management_url(format!("http://ops:{secret}@127.0.0.1:9")),
        )
        .await;
    let q = broker.queue("no-census");
    let hold = broker.hold(&q, 300);
    held_once(&broker, &[&backend], &QueueConfig::new(&q), 300).await;
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        outcomes.push(
            bounded("prune", PRUNE_BOUND, backend.prune_hold(&q, &hold))
                .await
                .unwrap(),
        );
    }
    // Never deleted; uncounted (the census was asked and could not tell)
    // unless the broker itself showed a reason to keep it.
    assert!(
        outcomes
            .iter()
            .all(|o| !matches!(o, HoldPruned::Deleted { .. })),
        "{outcomes:?}"
    );
    assert!(outcomes.contains(&HoldPruned::Unverified), "{outcomes:?}");
    assert!(broker.exists(&hold).await);
    let said = crate::support::management_notices_mentioning(&hold);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("127.0.0.1:9") && !said[0].contains(&secret),
        "{said:?}"
    );
    let (leaks, _) = crate::support::log_leaks();
    assert!(leaks.iter().all(|l| !l.contains("MGMTSECRET")), "{leaks:?}");
}

/// Without the `management` feature and without a census, the backend
/// cannot count the jobs a quorum hold keeps past their delay: it prunes
/// no hold by itself, and `prune_hold` keeps every hold.
#[cfg(not(feature = "management"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_management_feature_or_a_census_no_hold_is_pruned() {
    let broker = broker!("without_the_management_feature_or_a_census_no_hold_is_pruned");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .retry_granularity(Duration::from_millis(1))
                .prune_holds_after(Some(Duration::from_secs(2))),
        )
        .await;
    let q = broker.queue("no-census");
    let hold = broker.hold(&q, 300);
    held_once(&broker, &[&backend], &QueueConfig::new(&q), 300).await;
    // Several rounds of the idle pruner (every half second with a 2 s idle
    // time): none deletes the hold.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(broker.exists(&hold).await);
    assert_eq!(
        bounded("prune", PRUNE_BOUND, backend.prune_hold(&q, &hold))
            .await
            .unwrap(),
        HoldPruned::Unverified
    );
    assert!(broker.exists(&hold).await);
}
