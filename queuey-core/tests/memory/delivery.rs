//! Deliveries: prefetch, redelivery, requeue, ordering, shutdown.

use queuey_core::Disposition;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::{EnqueueOptions, Error, Producer, QueueConfig, Queues};

use crate::support::{PlainTask, Task, TestQueues, TightTask, assert_idle, n_of, next};

const WORK: &str = "test.work";

async fn setup() -> (Arc<MemoryBackend>, Producer<TestQueues, Arc<MemoryBackend>>) {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::new(backend.clone()).await.unwrap();
    (backend, producer)
}

#[tokio::test(start_paused = true)]
async fn prefetch_two_holds_back_the_third_delivery_until_one_is_acked() {
    let (backend, producer) = setup().await;
    for n in 0..3 {
        producer.enqueue(&TightTask { n }).await.unwrap();
    }
    let mut stream = backend.consume(&TestQueues::Tight.config()).await.unwrap();
    let first = next(&mut stream).await;
    let second = next(&mut stream).await;
    assert_idle(&mut stream).await;
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_idle(&mut stream).await;
    assert_eq!(backend.unacked_count("test.tight"), 2);
    assert_eq!(backend.ready_count("test.tight"), 1);

    second.ack().await.unwrap();
    let third = next(&mut stream).await;
    assert_eq!(n_of(&*third), 2);
    assert_eq!(backend.unacked_count("test.tight"), 2);
    first.ack().await.unwrap();
    third.ack().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn prefetch_is_per_consumer() {
    let (backend, producer) = setup().await;
    for n in 0..4 {
        producer.enqueue(&TightTask { n }).await.unwrap();
    }
    let mut a = backend.consume(&TestQueues::Tight.config()).await.unwrap();
    let mut b = backend.consume(&TestQueues::Tight.config()).await.unwrap();
    let held = [
        next(&mut a).await,
        next(&mut a).await,
        next(&mut b).await,
        next(&mut b).await,
    ];
    assert_idle(&mut a).await;
    assert_eq!(backend.unacked_count("test.tight"), 4);
    for d in held {
        d.ack().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn an_unsettled_dropped_delivery_is_redelivered_in_its_place() {
    let (backend, producer) = setup().await;
    for n in 0..3 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let first = next(&mut stream).await;
    assert!(!first.redelivered());
    let id = first.envelope().job_id;
    drop(first);
    assert_eq!(backend.unacked_count(WORK), 0);

    let again = next(&mut stream).await;
    assert_eq!(
        again.envelope().job_id,
        id,
        "back at the head, not the tail"
    );
    assert!(again.redelivered());
    assert_eq!(again.envelope().attempt, 1, "a redelivery is not a retry");
    again.ack().await.unwrap();
    assert!(!next(&mut stream).await.redelivered());
}

#[tokio::test(start_paused = true)]
async fn deliveries_of_a_dropped_consumer_are_redelivered() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    drop(stream);
    drop(d);
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    assert!(next(&mut stream).await.redelivered());
}

#[tokio::test(start_paused = true)]
async fn a_delivery_outliving_its_consumer_can_still_be_acked() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    drop(stream);
    d.ack().await.unwrap();
    assert_eq!(backend.unacked_count(WORK), 0);
    assert_eq!(backend.ready_count(WORK), 0);
}

#[tokio::test(start_paused = true)]
async fn nack_requeue_redelivers_at_once() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    producer.enqueue(&Task { n: 2 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    d.settle(Disposition::Requeue).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(n_of(&*d), 1);
    assert!(d.redelivered());
}

#[tokio::test(start_paused = true)]
async fn higher_priority_first_fifo_within_a_level_and_clamped_to_the_top() {
    let (backend, producer) = setup().await;
    let plan = [(0, 0), (1, 5), (2, 0), (3, 5), (4, 200), (5, 10), (6, 1)];
    for (n, priority) in plan {
        producer
            .enqueue_with(&Task { n }, EnqueueOptions::default().priority(priority))
            .await
            .unwrap();
    }
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let mut order = Vec::new();
    for _ in plan {
        let d = next(&mut stream).await;
        order.push(n_of(&*d));
        d.ack().await.unwrap();
    }
    // 200 counts as the top level (10), the same level as job 5, so
    // publication order decides between them.
    assert_eq!(order, vec![4, 5, 1, 3, 6, 0, 2]);
}

#[tokio::test(start_paused = true)]
async fn a_queue_without_priorities_is_fifo() {
    let (backend, producer) = setup().await;
    for (n, priority) in [(0, 0), (1, 9), (2, 3)] {
        producer
            .enqueue_with(
                &PlainTask { n },
                EnqueueOptions::default().priority(priority),
            )
            .await
            .unwrap();
    }
    producer
        .defer(&PlainTask { n: 3 }, Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_millis(1)).await;
    let mut stream = backend.consume(&TestQueues::Plain.config()).await.unwrap();
    let mut order = Vec::new();
    for _ in 0..4 {
        let d = next(&mut stream).await;
        order.push(n_of(&*d));
        d.ack().await.unwrap();
    }
    assert_eq!(order, vec![0, 1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn message_ttl_drops_messages_that_waited_too_long() {
    let backend = Arc::new(MemoryBackend::new());
    let config = QueueConfig::new("test.ttl").message_ttl(Duration::from_secs(10));
    backend
        .declare(std::slice::from_ref(&config))
        .await
        .unwrap();
    let payload = serde_json::value::to_raw_value(&Task { n: 1 }).unwrap();
    backend
        .publish(&queuey_core::Envelope::new(
            "task",
            "test.ttl",
            payload.clone(),
        ))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(10)).await;
    backend
        .publish(&queuey_core::Envelope::new("task", "test.ttl", payload))
        .await
        .unwrap();
    let mut stream = backend.consume(&config).await.unwrap();
    next(&mut stream).await.ack().await.unwrap();
    assert_idle(&mut stream).await;
    assert_eq!(backend.ready_count("test.ttl"), 0);
}

#[tokio::test(start_paused = true)]
async fn closing_ends_streams_and_refuses_further_work() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    let mut idle = backend.consume(&TestQueues::Plain.config()).await.unwrap();
    let waiting = tokio::spawn(async move { idle.next().await.is_none() });
    tokio::task::yield_now().await;

    backend.close();
    assert!(waiting.await.unwrap(), "a waiting consumer ends");
    assert!(stream.next().await.is_none());
    assert!(matches!(d.ack().await, Err(Error::ShutDown)));
    assert!(matches!(
        producer.enqueue(&Task { n: 2 }).await,
        Err(Error::ShutDown)
    ));
    assert!(matches!(
        backend.consume(&TestQueues::Work.config()).await.err(),
        Some(Error::ShutDown)
    ));
}

#[tokio::test(start_paused = true)]
async fn consuming_a_queue_that_does_not_exist_is_an_error() {
    let backend = MemoryBackend::new();
    let err = backend
        .consume(&QueueConfig::new("nope"))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("`nope`"), "{err}");
    let err = backend
        .consume(&QueueConfig::new("x").prefetch(0))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn works_behind_arc_dyn_backend() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    assert_eq!(n_of(&*next(&mut stream).await), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_goes_back_to_the_queue_it_was_consumed_from() {
    let (backend, _producer) = setup().await;
    // A message moved here from another queue still names that one.
    let payload = serde_json::value::to_raw_value(&Task { n: 1 }).unwrap();
    let moved = queuey_core::Envelope::new("task", "test.plain", payload);
    backend.publish_raw(WORK, moved.encode().unwrap()).unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(d.envelope().queue, "test.plain");
    d.settle(Disposition::Retry {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    assert_eq!(backend.held_count(WORK), 1);
    assert_eq!(backend.held_count("test.plain"), 0);
    let again = next(&mut stream).await;
    assert_eq!(
        (again.envelope().attempt, again.envelope().queue.as_str()),
        (2, WORK)
    );
}
