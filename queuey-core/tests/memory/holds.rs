//! Holds: never early, exactly on time under the paused clock, rounding,
//! and the limits.

use queuey_core::Disposition;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::memory::MemoryOptions;
use queuey_core::{Error, MAX_DEFERRAL_MS, Producer, Queues};
use tokio::time::{Instant, advance};

use crate::support::{Task, TestQueues, n_of, next};

const WORK: &str = "test.work";

async fn producer(backend: &Arc<MemoryBackend>) -> Producer<TestQueues, Arc<MemoryBackend>> {
    Producer::new(backend.clone()).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_hold_of_one_and_a_half_seconds_is_invisible_at_1499_ms_and_visible_at_1500() {
    let backend = Arc::new(MemoryBackend::new());
    producer(&backend)
        .await
        .enqueue_after(&Task { n: 1 }, Duration::from_millis(1_500))
        .await
        .unwrap();
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (0, 1)
    );
    advance(Duration::from_millis(1_499)).await;
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (0, 1)
    );
    advance(Duration::from_millis(1)).await;
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_consumer_gets_the_job_exactly_when_it_is_due() {
    let backend = Arc::new(MemoryBackend::new());
    let start = Instant::now();
    producer(&backend)
        .await
        .enqueue_after(&Task { n: 1 }, Duration::from_millis(1_500))
        .await
        .unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(start.elapsed(), Duration::from_millis(1_500));
    d.ack().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn short_holds_are_not_stuck_behind_long_ones() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(&backend).await;
    let start = Instant::now();
    producer
        .enqueue_after(&Task { n: 60 }, Duration::from_secs(60))
        .await
        .unwrap();
    producer
        .enqueue_after(&Task { n: 1 }, Duration::from_secs(1))
        .await
        .unwrap();
    producer
        .enqueue_after(&Task { n: 2 }, Duration::from_secs(2))
        .await
        .unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    for (expected, at) in [(1, 1), (2, 2), (60, 60)] {
        let d = next(&mut stream).await;
        assert_eq!(n_of(&*d), expected);
        assert_eq!(start.elapsed(), Duration::from_secs(at));
        d.ack().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn delays_round_up_to_the_granularity_never_down() {
    let options = MemoryOptions::default()
        .retry_granularity(Duration::from_secs(1))
        .deferred_granularity(Duration::from_millis(250));
    let backend = Arc::new(MemoryBackend::with_options(options));
    let producer = producer(&backend).await;
    producer
        .enqueue_after(&Task { n: 1 }, Duration::from_millis(1_001))
        .await
        .unwrap();
    producer
        .defer(&Task { n: 2 }, Duration::from_millis(251))
        .await
        .unwrap();

    advance(Duration::from_millis(499)).await;
    assert_eq!(backend.ready_count(WORK), 0);
    advance(Duration::from_millis(1)).await;
    assert_eq!(
        backend.ready_count(WORK),
        1,
        "251 ms deferral rounds to 500 ms"
    );
    advance(Duration::from_millis(1_499)).await;
    assert_eq!(backend.ready_count(WORK), 1);
    advance(Duration::from_millis(1)).await;
    assert_eq!(backend.ready_count(WORK), 2, "1001 ms retry rounds to 2 s");
}

#[tokio::test(start_paused = true)]
async fn a_zero_delay_is_an_immediate_publish() {
    let backend = Arc::new(MemoryBackend::new());
    producer(&backend)
        .await
        .enqueue_after(&Task { n: 1 }, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn the_longest_delay_is_accepted_and_one_millisecond_more_is_refused() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(&backend).await;
    producer
        .enqueue_after(&Task { n: 1 }, Duration::from_millis(MAX_DEFERRAL_MS))
        .await
        .unwrap();
    let err = producer
        .enqueue_after(&Task { n: 2 }, Duration::from_millis(MAX_DEFERRAL_MS + 1))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::DelayTooLong { queue, delay_ms, max_ms }
            if queue == WORK && *delay_ms == u128::from(MAX_DEFERRAL_MS) + 1 && *max_ms == MAX_DEFERRAL_MS),
        "{err:?}"
    );
    let err = producer
        .defer(&Task { n: 3 }, Duration::from_secs(40 * 24 * 3600))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DelayTooLong { .. }), "{err:?}");
    assert_eq!(backend.held_count(WORK), 1);
    advance(Duration::from_millis(MAX_DEFERRAL_MS - 1)).await;
    assert_eq!(backend.ready_count(WORK), 0);
    advance(Duration::from_millis(1)).await;
    assert_eq!(backend.ready_count(WORK), 1);
}

#[tokio::test(start_paused = true)]
async fn holds_need_a_queue_declared_through_this_backend() {
    let backend = Arc::new(MemoryBackend::new());
    // Someone else created the queue: publishing works, holds do not.
    backend.create_queue(WORK);
    let producer = Producer::<TestQueues, _>::new_undeclared(backend.clone());
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    for result in [
        producer
            .enqueue_after(&Task { n: 2 }, Duration::from_secs(1))
            .await,
        producer.defer(&Task { n: 3 }, Duration::from_secs(1)).await,
        producer
            .enqueue_with(
                &Task { n: 4 },
                queuey_core::EnqueueOptions::default().delay(Duration::from_secs(1)),
            )
            .await,
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::UnknownQueue { queue } if queue == WORK),
            "{err:?}"
        );
    }
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (1, 0)
    );

    // Retrying a delivery from such a queue fails before anything is acked.
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    let err = d
        .settle(Disposition::Retry {
            delay: Duration::from_secs(1),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownQueue { .. }), "{err:?}");
    assert!(next(&mut stream).await.redelivered());

    // Once declared, the same calls work.
    backend.declare(&[TestQueues::Work.config()]).await.unwrap();
    producer
        .enqueue_after(&Task { n: 2 }, Duration::from_secs(1))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_hold_keeps_attempts_deferrals_priority_and_correlation() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(&backend).await;
    let id = producer
        .enqueue_with(
            &Task { n: 1 },
            queuey_core::EnqueueOptions::default().correlation_id("order-7"),
        )
        .await
        .unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let top = TestQueues::Work.config().top_priority();

    // attempt 1 -> retry -> attempt 2 -> defer -> defer -> retry -> attempt 3
    let d = next(&mut stream).await;
    d.settle(Disposition::Retry {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    d.settle(Disposition::Defer {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    assert_eq!(
        (
            d.envelope().attempt,
            d.envelope().deferrals,
            d.envelope().priority
        ),
        (2, 1, top)
    );
    d.settle(Disposition::Defer {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    d.settle(Disposition::Retry {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    let env = d.envelope();
    assert_eq!((env.attempt, env.deferrals, env.priority), (3, 2, 0));
    assert_eq!(env.job_id, id);
    assert_eq!(env.correlation_id.as_deref(), Some("order-7"));
    assert_eq!(env.payload_as::<Task>().unwrap(), Task { n: 1 });
}

#[tokio::test(start_paused = true)]
async fn a_deferral_always_carries_the_queues_top_priority() {
    let backend = Arc::new(MemoryBackend::new());
    backend.declare(&TestQueues::configs()).await.unwrap();
    // Even if the caller forgot to raise it, the backend stamps the top level.
    let payload = serde_json::value::to_raw_value(&Task { n: 1 }).unwrap();
    let env = queuey_core::Envelope::new("task", WORK, payload);
    backend.defer(&env, Duration::from_secs(1)).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(
        d.envelope().priority,
        TestQueues::Work.config().top_priority()
    );
}

/// Relative buckets: delays land in buckets that grow by 10 %, never early,
/// each late by less than 10 % (or one step).
#[tokio::test(start_paused = true)]
async fn relative_granularity_rounds_into_growing_buckets_never_early() {
    use futures::StreamExt;
    use queuey_core::backend::Granularity;
    use queuey_core::{Envelope, QueueConfig};
    let backend = MemoryBackend::with_options(
        MemoryOptions::default()
            .retry_granularity(Granularity::relative(10, Duration::from_secs(1))),
    );
    let config = QueueConfig::new("rel");
    backend
        .declare(std::slice::from_ref(&config))
        .await
        .unwrap();
    let mut stream = backend.consume(&config).await.unwrap();
    let start = tokio::time::Instant::now();
    let delay = Duration::from_millis(10_001); // the 11 s bucket
    let envelope = Envelope::new("t", "rel", serde_json::value::to_raw_value(&1).unwrap());
    backend.publish_after(&envelope, delay).await.unwrap();
    let delivery = stream.next().await.unwrap().unwrap();
    let waited = start.elapsed();
    assert!(waited >= delay, "released early: {waited:?}");
    assert!(
        waited <= Duration::from_millis(11_000) + Duration::from_millis(5),
        "{waited:?}"
    );
    delivery.ack().await.unwrap();
}
