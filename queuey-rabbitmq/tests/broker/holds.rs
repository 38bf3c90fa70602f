//! Holds: release times, hold-queue expiry, and what priority a returning
//! job has.

use queuey_core::Disposition;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use queuey_core::backend::Backend;
use queuey_core::{Envelope, QueueConfig};
use queuey_rabbitmq::{HoldQueues, RabbitMqOptions};

use crate::support::{death_queues, envelope, n_of, warnings_mentioning, within};

/// How late a hold may come back. RabbitMQ expires messages at the head of
/// the hold queue promptly; seconds of slack keep a loaded machine green.
const LATENESS: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_are_never_early_and_arrive_within_a_margin() {
    let broker = broker!("holds_are_never_early_and_arrive_within_a_margin");
    let backend = broker
        .backend(RabbitMqOptions::default().retry_granularity(Duration::from_millis(1)))
        .await;
    let q = broker.queue("timing");
    broker.hold(&q, 200);
    broker.hold(&q, 1_000);
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();

    let started = Instant::now();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1_000), Duration::from_millis(1_000)),
    )
    .await
    .unwrap();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 200), Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let mut arrivals = Vec::new();
    for _ in 0..2 {
        let delivery = within("held job", stream.next()).await.unwrap().unwrap();
        arrivals.push((n_of(delivery.envelope()), started.elapsed()));
        within("ack", delivery.ack()).await.unwrap();
    }
    assert_eq!(
        arrivals.iter().map(|a| a.0).collect::<Vec<_>>(),
        [200, 1_000],
        "{arrivals:?}"
    );
    for (delay_ms, elapsed) in arrivals {
        let delay = Duration::from_millis(u64::from(delay_ms));
        assert!(
            elapsed >= delay,
            "released early: {delay:?} hold after {elapsed:?}"
        );
        assert!(
            elapsed <= delay + LATENESS,
            "{delay:?} hold took {elapsed:?}"
        );
    }
}

/// A classic hold queue outlives its message and the broker deletes it once
/// it has been idle for `x-expires`, twice its TTL. (A quorum hold queue has
/// no `x-expires`: see `declare::hold_queues_have_the_documented_arguments`.)
///
/// Every declaration renews that lease, a passive one too, so the test looks
/// at the queue once, right after the publish and far from its expiry, then
/// leaves it alone for a whole lease. Only then does it watch the broker's
/// listing (which renews nothing) for the queue to go, with a generous
/// bound: a slow `rabbitmqctl` only makes it notice later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_hold_queue_deletes_itself() {
    const TTL: Duration = Duration::from_secs(2);
    let broker = broker!("an_idle_hold_queue_deletes_itself");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .hold_queues(HoldQueues::Classic)
                .retry_granularity(Duration::from_millis(500)),
        )
        .await;
    let q = broker.queue("expiry");
    let hold = broker.classic_hold(&q, 2_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let started = Instant::now();
    // 1.8 s rounds up to the 2 s hold queue, which expires after 4 s idle.
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(1_800)),
    )
    .await
    .unwrap();
    // It exists and holds the job. This passive declare renews the lease, so
    // the idle time counts from its answer.
    assert_eq!(broker.ready(&hold).await, 1);
    let renewed = Instant::now();

    // Its message is released onto q before it goes, never early (when
    // due, before the end of the hold).
    broker.wait_ready(&q, 1).await;
    assert!(
        started.elapsed() >= Duration::from_millis(1_800),
        "released after only {:?}",
        started.elapsed()
    );

    // Idle for a whole lease, it must then disappear.
    tokio::time::sleep((renewed + 2 * TTL).saturating_duration_since(Instant::now())).await;
    within("the idle hold queue to be deleted", async {
        while broker.queues_starting_with(&hold).await.contains(&hold) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert_eq!(
        broker.ready(&q).await,
        1,
        "the job went with its hold queue"
    );
}

/// A hold relies on a declaration of its hold queue sent less than half a
/// TTL ago; after an operator deleted the queue, the next hold's publish
/// comes back `NO_ROUTE` (it is mandatory), and the hold declares the
/// queue and publishes again: the job is not lost, and nothing is logged
/// as a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_hold_queue_is_declared_again_by_the_next_hold() {
    let broker = broker!("a_deleted_hold_queue_is_declared_again_by_the_next_hold");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("redeclare");
    let hold = broker.hold(&q, 2_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let delay = Duration::from_secs(2);
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), delay),
    )
    .await
    .unwrap();
    // The operator deletes the hold queue, and the first job with it.
    assert_eq!(broker.delete_raw(&hold).await, 1);
    assert!(!broker.exists(&hold).await);

    let started = Instant::now();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 2), delay),
    )
    .await
    .expect("a hold into a deleted hold queue");
    assert_eq!(broker.ready(&hold).await, 1, "the hold queue is back");
    broker.wait_ready(&q, 1).await;
    assert!(started.elapsed() >= delay, "early: {:?}", started.elapsed());
    let back = broker.get(&q).await.expect("the second job");
    let job = Envelope::decode(&back.delivery.data).unwrap();
    assert_eq!(n_of(&job), 2);
    assert_eq!(death_queues(&back), std::slice::from_ref(&hold));
    let warnings = warnings_mentioning(&hold);
    assert!(
        warnings.is_empty(),
        "the hold queue was not declared before the publish: {warnings:?}"
    );
}

/// `retry_granularity` rounds retries and delayed enqueues,
/// `deferred_granularity` rounds deferrals, and neither the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_granularity_rounds_its_own_kind_of_hold() {
    let broker = broker!("each_granularity_rounds_its_own_kind_of_hold");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .retry_granularity(Duration::from_secs(10))
                .deferred_granularity(Duration::from_millis(100)),
        )
        .await;
    let q = broker.queue("granularity");
    let retry_hold = broker.hold(&q, 10_000);
    let deferral_hold = broker.hold(&q, 200);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let asked = Duration::from_millis(150);

    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_secs(5)),
    )
    .await
    .unwrap();
    // 5 s at 10 s: the 10 s hold queue, which keeps it for 5 s (ample time
    // to look).
    assert_eq!(broker.ready(&retry_hold).await, 1);
    assert!(!broker.exists(&deferral_hold).await);

    let started = Instant::now();
    within("defer", backend.defer(&envelope(&q, 2), asked))
        .await
        .unwrap();
    // 150 ms at 100 ms: the 200 ms hold queue. It expires 400 ms after its
    // declaration, too soon to look for it on a busy machine; the job it
    // released names it in its `x-death` header instead.
    broker.wait_ready(&q, 1).await;
    assert!(started.elapsed() >= asked, "early: {:?}", started.elapsed());
    let back = broker.get(&q).await.expect("the deferred job");
    assert_eq!(n_of(&Envelope::decode(&back.delivery.data).unwrap()), 2);
    assert_eq!(death_queues(&back), std::slice::from_ref(&deferral_hold));

    // No other hold queue was ever made for q.
    let listed = broker.queues_starting_with(&format!("{q}.deferred.")).await;
    assert!(listed.contains(&retry_hold), "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|name| *name == retry_hold || *name == deferral_hold),
        "{listed:?}"
    );
}

/// `Backend::defer`, the producer's deferral: the job comes back to its
/// queue with that queue's top priority, its attempt and deferral counts
/// as sent.
/// Relative granularity: delays land in the hold queues of buckets that grow
/// by 10 % from 1 s, each a pure function of the delay, never shorter than
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_buckets_create_the_expected_hold_queues() {
    use queuey_core::backend::Granularity;
    let broker = broker!("relative_buckets_create_the_expected_hold_queues");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .retry_granularity(Granularity::relative(10, Duration::from_secs(1))),
        )
        .await;
    let q = broker.queue("relative");
    // (asked, the bucket it lands in): 10 s stays 10 s; just over it is the
    // next bucket, 11 s; just over 11 s is 12 s (11 s + 10 %, down to a
    // whole second).
    let cases = [(10_000, 10_000), (10_001, 11_000), (11_001, 12_000)];
    let holds: Vec<String> = cases.iter().map(|(_, b)| broker.hold(&q, *b)).collect();
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    for (n, (asked, _)) in cases.iter().enumerate() {
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, n as u32), Duration::from_millis(*asked)),
        )
        .await
        .unwrap();
    }
    for hold in &holds {
        assert_eq!(broker.ready(hold).await, 1, "{hold}");
    }
    // Nothing else was created.
    let prefix = format!("{q}.deferred.");
    let mut found = broker.queues_starting_with(&prefix).await;
    found.sort();
    let mut expected = holds.clone();
    expected.sort();
    assert_eq!(found, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_defer_returns_the_job_with_the_queues_top_priority() {
    let broker = broker!("backend_defer_returns_the_job_with_the_queues_top_priority");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("producer-defer");
    let low = broker.queue("producer-defer-low");
    let holds = [broker.hold(&q, 1_000), broker.hold(&low, 1_000)];
    let configs = [QueueConfig::new(&q), QueueConfig::new(&low).max_priority(4)];
    within("declare", backend.declare(&configs)).await.unwrap();

    let started = Instant::now();
    let mut sent = Vec::new();
    for queue in [&q, &low] {
        let mut job = envelope(queue, 1).with_priority(2);
        job.attempt = 3;
        job.deferrals = 2;
        within("defer", backend.defer(&job, Duration::from_millis(800)))
            .await
            .expect("Backend::defer");
        sent.push(job);
    }
    for ((queue, hold), (job, top)) in [&q, &low]
        .into_iter()
        .zip(&holds)
        .zip(sent.iter().zip([10, 4]))
    {
        broker.wait_ready(queue, 1).await;
        assert!(started.elapsed() >= Duration::from_millis(800), "early");
        let back = broker.get(queue).await.expect("the deferred job");
        let env = Envelope::decode(&back.delivery.data).unwrap();
        assert_eq!(env.job_id, job.job_id);
        assert_eq!((env.attempt, env.deferrals, env.priority), (3, 2, top));
        assert_eq!(*back.delivery.properties.priority(), Some(top));
        assert_eq!(death_queues(&back), std::slice::from_ref(hold));
    }
}

/// A sub-millisecond granularity counts as 1 ms, and rounding is up: 50.5 ms
/// goes to the 51 ms hold queue. A hold shorter than the shortest the lease
/// rule can protect (50 ms) waits in the 50 ms hold queue: late, never
/// early, and never lost with its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_millisecond_granularity_counts_as_one_millisecond() {
    let broker = broker!("a_sub_millisecond_granularity_counts_as_one_millisecond");
    let backend = broker
        .backend(RabbitMqOptions::default().retry_granularity(Duration::from_micros(500)))
        .await;
    let q = broker.queue("sub-ms");
    assert_eq!(queuey_rabbitmq::topology::SHORTEST_HOLD_MS, 50);
    let shortest = broker.hold(&q, 50);
    let rounded = broker.hold(&q, 51);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    for (n, asked, hold) in [
        (1, Duration::from_micros(1_500), &shortest),
        (2, Duration::from_micros(50_500), &rounded),
    ] {
        let started = Instant::now();
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, n), asked),
        )
        .await
        .unwrap();
        // The released job is the witness of where it waited.
        broker.wait_ready(&q, 1).await;
        assert!(started.elapsed() >= asked, "early: {:?}", started.elapsed());
        let back = broker.get(&q).await.expect("the held job");
        assert_eq!(n_of(&Envelope::decode(&back.delivery.data).unwrap()), n);
        assert_eq!(death_queues(&back), std::slice::from_ref(hold));
    }
}

/// Every hold publish carries `queuey-due-at`: when the job becomes due, in
/// milliseconds since the Unix epoch, as a 64-bit integer; the job comes
/// back no earlier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_carry_the_time_they_become_due() {
    let broker = broker!("holds_carry_the_time_they_become_due");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("due-at");
    broker.hold(&q, 1_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let epoch_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let before = epoch_ms();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(1_000)),
    )
    .await
    .unwrap();
    let after = epoch_ms();
    broker.wait_ready(&q, 1).await;
    let released = epoch_ms();
    let back = broker.get(&q).await.expect("the held job");
    let headers = back
        .delivery
        .properties
        .headers()
        .clone()
        .unwrap_or_default();
    let due = match headers.inner().get("queuey-due-at") {
        Some(lapin::types::AMQPValue::LongLongInt(ms)) => *ms,
        other => panic!("queuey-due-at is {other:?}"),
    };
    assert!(due >= before + 1_000 && due <= after + 1_000, "{due}");
    assert!(released >= due, "released at {released}, due at {due}");
}

/// Behind a burst of publishes, a short classic hold queue's lease can run out
/// between its declaration and the publish into it. Such a publish comes
/// back `NO_ROUTE` and the hold declares the queue again and publishes
/// again; one confirmed too late to prove its lease is checked by a second
/// declaration. Every hold must succeed and every held job come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_behind_a_burst_of_publishes_all_come_back() {
    const BURST: u32 = 1_500;
    let broker = broker!("holds_behind_a_burst_of_publishes_all_come_back");
    let backend = Arc::new(
        broker
            .backend(
                RabbitMqOptions::default()
                    .hold_queues(HoldQueues::Classic)
                    .publish_concurrency(1)
                    .retry_granularity(Duration::from_millis(100)),
            )
            .await,
    );
    let q = broker.queue("lease");
    // 20 holds, 100 ms to 2 s, each in a hold queue of its own.
    let delays: Vec<u64> = (1..=20).map(|i| i * 100).collect();
    for ms in &delays {
        broker.classic_hold(&q, *ms);
    }
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();

    let started = Instant::now();
    let burst: Vec<_> = (0..BURST)
        .map(|n| {
            let (backend, q) = (Arc::clone(&backend), q.clone());
            tokio::spawn(async move { backend.publish(&envelope(&q, n)).await })
        })
        .collect();
    // The holds queue up for the one publishing channel behind the burst.
    let holds: Vec<_> = delays
        .iter()
        .map(|&ms| {
            let (backend, q) = (Arc::clone(&backend), q.clone());
            tokio::spawn(async move {
                let job = envelope(&q, 100_000 + ms as u32);
                backend.publish_after(&job, Duration::from_millis(ms)).await
            })
        })
        .collect();
    for task in burst {
        within("burst publish", task)
            .await
            .unwrap()
            .expect("burst publish");
    }
    let mut held = 0;
    let mut failed = Vec::new();
    for (ms, task) in delays.iter().zip(holds) {
        match within("hold", task).await.unwrap() {
            Ok(()) => held += 1,
            Err(e) => failed.push(format!("{ms} ms: {e}")),
        }
    }
    let publishing = started.elapsed();
    assert!(failed.is_empty(), "refused holds: {failed:?}");
    // Every hold that returned Ok comes back: wait_ready allows far more
    // than the longest delay.
    broker.wait_ready(&q, BURST + held).await;
    eprintln!(
        "{BURST} publishes and {held} holds through one channel in {publishing:?}, all back after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferral_overtakes_the_backlog() {
    const BACKLOG: u32 = 200;
    let broker = broker!("a_deferral_overtakes_the_backlog");
    let backend = broker
        .backend(RabbitMqOptions::default().deferred_granularity(Duration::from_millis(100)))
        .await;
    let q = broker.queue("overtake");
    broker.hold(&q, 300);
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let backlog: Vec<_> = (0..BACKLOG).map(|n| envelope(&q, n)).collect();
    for result in within("backlog", backend.publish_batch(&backlog)).await {
        result.unwrap();
    }

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let first = within("first", stream.next()).await.unwrap().unwrap();
    let deferred_n = n_of(first.envelope());
    within(
        "defer",
        first.settle(Disposition::Defer {
            delay: Duration::from_millis(300),
        }),
    )
    .await
    .unwrap();
    // With prefetch 1 the consumer now holds the next backlog message.
    let second = within("second", stream.next()).await.unwrap().unwrap();
    assert_ne!(n_of(second.envelope()), deferred_n);
    // Wait until the deferral is back on q behind the remaining backlog.
    broker.wait_ready(&q, BACKLOG - 2 + 1).await;
    within("ack", second.ack()).await.unwrap();

    let back = within("deferral", stream.next()).await.unwrap().unwrap();
    let env = back.envelope();
    assert_eq!(n_of(env), deferred_n, "the deferral did not come first");
    assert_eq!((env.attempt, env.deferrals, env.priority), (1, 1, 10));
    within("ack", back.ack()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_joins_the_back_of_the_queue() {
    const BACKLOG: u32 = 50;
    let broker = broker!("a_retry_joins_the_back_of_the_queue");
    let backend = broker
        .backend(RabbitMqOptions::default().retry_granularity(Duration::from_millis(100)))
        .await;
    let q = broker.queue("fifo");
    broker.hold(&q, 200);
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    // One at a time, so the queue holds them in order.
    for n in 0..BACKLOG {
        within("backlog", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    // A high-priority job, served first; its retry must not keep that priority.
    within(
        "publish",
        backend.publish(&envelope(&q, 999).with_priority(5)),
    )
    .await
    .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let first = within("first", stream.next()).await.unwrap().unwrap();
    assert_eq!(n_of(first.envelope()), 999);
    within(
        "retry",
        first.settle(Disposition::Retry {
            delay: Duration::from_millis(200),
        }),
    )
    .await
    .unwrap();
    broker.wait_ready(&q, BACKLOG).await; // 49 still ready + the returned retry

    let mut order = Vec::new();
    for _ in 0..=BACKLOG {
        let d = within("delivery", stream.next()).await.unwrap().unwrap();
        order.push((
            n_of(d.envelope()),
            d.envelope().attempt,
            d.envelope().priority,
        ));
        within("ack", d.ack()).await.unwrap();
    }
    assert_eq!(order.last(), Some(&(999, 2, 0)), "{order:?}");
    let rest: Vec<u32> = order[..BACKLOG as usize].iter().map(|o| o.0).collect();
    assert_eq!(rest, (0..BACKLOG).collect::<Vec<_>>());
}

/// A hold publish the broker refuses (here: a policy caps the hold queue at
/// no messages, so every publish is nacked) is published again a few times,
/// then the hold fails with `Nacked` within its bound; once the policy is
/// gone, holding works again (on a fresh channel: the refused one may stay
/// refused by a quorum hold queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_hold_publish_is_tried_again_then_fails_then_recovers() {
    let broker = broker!("a_refused_hold_publish_is_tried_again_then_fails_then_recovers");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("nacked-hold");
    // Tracked so that the hold queue is deleted with the test.
    broker.hold(&q, 1_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    // Declared once so that the policy applies to it from the start.
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 0), Duration::from_secs(1)),
    )
    .await
    .unwrap();
    broker.wait_ready(&q, 1).await;
    let mut held = 1;
    let policy = crate::support::Policy::on_holds(&broker, &q, r#"{"max-length":0}"#).await;
    // The policy takes a moment to reach the queue.
    let (refused, took) = within("a refused hold", async {
        loop {
            let started = Instant::now();
            match backend
                .publish_after(&envelope(&q, 1), Duration::from_secs(1))
                .await
            {
                Err(e) => break (e, started.elapsed()),
                Ok(()) => {
                    held += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
    .await;
    assert_eq!(
        crate::support::kind(&refused),
        queuey_core::BackendErrorKind::Nacked,
        "{refused}"
    );
    // Three publishes, with pauses of 50 and 100 ms between them.
    assert!(took >= Duration::from_millis(150), "gave up after {took:?}");
    drop(policy);
    // The policy's removal takes a moment to reach the hold queue.
    within("a hold accepted again", async {
        loop {
            match backend
                .publish_after(&envelope(&q, 2), Duration::from_secs(1))
                .await
            {
                Ok(()) => break,
                Err(e) => {
                    assert_eq!(
                        crate::support::kind(&e),
                        queuey_core::BackendErrorKind::Nacked,
                        "{e}"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
    .await;
    held += 1;
    // Every hold that was accepted comes back to `q`.
    broker.wait_ready(&q, held).await;
}

/// A job parked in a hold queue longer than its delay (here 1.5 s in the
/// 10 s hold of a 10 s granularity) leaves it at its due time, not at the
/// end of the hold: it carries what remains as its own time to live. The
/// broker drops that time to live when it puts the job back on its work
/// queue, so the job waits there as long as it must. Classic and quorum
/// hold queues alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_job_leaves_its_hold_at_its_due_time_not_at_the_end_of_the_hold() {
    let broker = broker!("a_held_job_leaves_its_hold_at_its_due_time_not_at_the_end_of_the_hold");
    for holds in [HoldQueues::Quorum, HoldQueues::Classic] {
        let backend = broker
            .backend(
                RabbitMqOptions::default()
                    .hold_queues(holds)
                    .retry_granularity(Duration::from_secs(10)),
            )
            .await;
        let q = broker.queue("due");
        let hold = match holds {
            HoldQueues::Classic => broker.classic_hold(&q, 10_000),
            _ => broker.hold(&q, 10_000),
        };
        within("declare", backend.declare(&[QueueConfig::new(&q)]))
            .await
            .unwrap();
        let delay = Duration::from_millis(1_500);
        let started = Instant::now();
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, 7), delay),
        )
        .await
        .unwrap();
        broker.wait_ready(&q, 1).await;
        let elapsed = started.elapsed();
        assert!(
            elapsed >= delay,
            "{holds:?}: released early, after {elapsed:?}"
        );
        assert!(
            elapsed < delay + LATENESS,
            "{holds:?}: released after {elapsed:?}, at the end of its 10 s hold rather than when due"
        );
        let back = broker.get(&q).await.expect("the held job");
        assert_eq!(n_of(&Envelope::decode(&back.delivery.data).unwrap()), 7);
        assert_eq!(death_queues(&back), std::slice::from_ref(&hold));
        assert_eq!(
            back.delivery.properties.expiration(),
            &None,
            "{holds:?}: the job kept its time to live on its work queue"
        );
    }
}
