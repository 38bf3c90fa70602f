//! Hand-backs that the poison guard does not count: a delivery settled
//! with `Disposition::Requeue`, and the deliveries a dropped stream had
//! received but not handed out, go back to their queue as new messages
//! (published, confirmed, then acknowledged), so the broker never marks
//! them redelivered and their count of unsettled deliveries stays as it
//! was. A worker pausing a queue or shutting down does both.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use lapin::BasicProperties;
use lapin::options::BasicAckOptions;
use lapin::types::{AMQPValue, FieldTable};
use queuey_core::backend::{Backend, Delivery};
use queuey_core::{Disposition, Envelope, QueueConfig, Uuid};
use queuey_rabbitmq::RabbitMqOptions;
use queuey_rabbitmq::topology::UNSETTLED_DELIVERIES_HEADER;

use crate::support::{envelope, guard_notices_mentioning, within};

/// The count a raw delivery carries, if any.
fn count_of(properties: &BasicProperties) -> Option<i64> {
    match properties
        .headers()
        .as_ref()?
        .inner()
        .get(UNSETTLED_DELIVERIES_HEADER)?
    {
        AMQPValue::LongLongInt(n) => Some(*n),
        other => panic!("the count is not a 64-bit integer: {other:?}"),
    }
}

/// Counts a job acknowledged, which must not have come redelivered.
fn count(acked: &mut HashMap<Uuid, u32>, delivery: &dyn Delivery) {
    assert!(
        !delivery.redelivered(),
        "job {} came marked redelivered",
        delivery.envelope().job_id
    );
    *acked.entry(delivery.envelope().job_id).or_default() += 1;
}

/// Prefetch 10, 20 jobs (every fourth carrying a count of 2 already): one
/// taken and handed back, the stream dropped with nine more buffered.
/// Read again through a plain consumer, every job comes once, none marked
/// redelivered, each with the count it was published with; the poison
/// guard moved nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_handed_back_and_a_dropped_streams_jobs_come_back_as_first_deliveries() {
    let broker =
        broker!("a_job_handed_back_and_a_dropped_streams_jobs_come_back_as_first_deliveries");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("hand-back");
    let config = QueueConfig::new(&q).prefetch(10);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut published = HashMap::new();
    for n in 0..20 {
        let job = envelope(&q, n);
        let count = (n % 4 == 0).then_some(2);
        let mut properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(job.job_id.to_string().into());
        if let Some(count) = count {
            let mut headers = FieldTable::default();
            headers.insert(
                UNSETTLED_DELIVERIES_HEADER.into(),
                AMQPValue::LongLongInt(count),
            );
            properties = properties.with_headers(headers);
        }
        broker
            .publish_raw(&q, &job.encode().unwrap(), properties)
            .await;
        published.insert(job.job_id, count);
    }

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let taken = within("a delivery", stream.next()).await.unwrap().unwrap();
    // A job that carries a count came back unsettled before: the worker is
    // told so, though the broker delivers it for the first time.
    assert_eq!(
        taken.redelivered(),
        published[&taken.envelope().job_id].is_some()
    );
    // Nine more are buffered by now (prefetch 10).
    within("nine buffered", async {
        while broker.ready_and_unacked(&q).await != Some((10, 10)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    within("hand back", taken.settle(Disposition::Requeue))
        .await
        .unwrap();
    drop(stream);

    // Every job back on `q` and nothing unacknowledged: the dropped
    // stream's channel is closed.
    within("all back", async {
        while broker.ready_and_unacked(&q).await != Some((20, 0)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (_channel, mut plain) = broker.consume_raw(&q, 20, "").await;
    let mut seen = HashMap::new();
    while seen.len() < 20 {
        let delivery = within("a plain delivery", plain.next())
            .await
            .unwrap()
            .unwrap();
        let job = Envelope::decode(&delivery.data).unwrap();
        assert!(
            !delivery.redelivered,
            "job {} came back redelivered",
            job.job_id
        );
        assert_eq!(
            count_of(&delivery.properties),
            published[&job.job_id],
            "job {}'s count changed",
            job.job_id
        );
        assert!(
            seen.insert(job.job_id, ()).is_none(),
            "job {} twice",
            job.job_id
        );
        delivery.ack(BasicAckOptions::default()).await.unwrap();
    }
    assert_eq!(broker.ready(&format!("{q}.suspect")).await, 0);
    assert_eq!(broker.ready(&format!("{q}.dead")).await, 0);
    assert!(guard_notices_mentioning(&q).is_empty());
    backend.close().await.unwrap();
}

/// A worker that stops and closes its backend at once: `close` waits for
/// the dropped stream to hand back what it had buffered, so nothing comes
/// back redelivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_backend_right_after_dropping_a_stream_still_hands_everything_back() {
    let broker =
        broker!("closing_the_backend_right_after_dropping_a_stream_still_hands_everything_back");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("hand-back-close");
    let config = QueueConfig::new(&q).prefetch(10);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    for n in 0..20 {
        within("publish", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let taken = within("a delivery", stream.next()).await.unwrap().unwrap();
    within("nine buffered", async {
        while broker.ready_and_unacked(&q).await != Some((10, 10)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    within("hand back", taken.settle(Disposition::Requeue))
        .await
        .unwrap();
    drop(stream);
    within("close", backend.close()).await.unwrap();

    broker.wait_ready(&q, 20).await;
    let mut seen = HashMap::new();
    while let Some(message) = broker.get(&q).await {
        assert!(!message.delivery.redelivered, "a job came back redelivered");
        let job = Envelope::decode(&message.delivery.data).unwrap();
        assert!(
            seen.insert(job.job_id, ()).is_none(),
            "job {} twice",
            job.job_id
        );
    }
    assert_eq!(seen.len(), 20);
}

/// Five rounds under a backlog of 200, as a worker pausing and resuming
/// does: consume (prefetch 10), take four, acknowledge two, hand one back,
/// drop the stream while one is still at work and acknowledge it after.
/// Then everything left is consumed: every job is acknowledged exactly
/// once, none came marked redelivered, and with the poison guard at its
/// default limit nothing reached the suspect or dead-letter queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_pause_and_resume_rounds_under_a_backlog_dead_letter_nothing() {
    const JOBS: u32 = 200;
    let broker = broker!("five_pause_and_resume_rounds_under_a_backlog_dead_letter_nothing");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("pause-rounds");
    let config = QueueConfig::new(&q).prefetch(10);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for n in 0..JOBS {
        let job = envelope(&q, n);
        ids.push(job.job_id);
        within("publish", backend.publish(&job)).await.unwrap();
    }
    let mut acked: HashMap<Uuid, u32> = HashMap::new();
    for _round in 0..5 {
        let mut stream = within("consume", backend.consume(&config)).await.unwrap();
        let mut taken = Vec::new();
        for _ in 0..4 {
            taken.push(within("a delivery", stream.next()).await.unwrap().unwrap());
        }
        let at_work = taken.pop().unwrap();
        let handed_back = taken.pop().unwrap();
        for delivery in taken {
            count(&mut acked, delivery.as_ref());
            within("ack", delivery.ack()).await.unwrap();
        }
        within("hand back", handed_back.settle(Disposition::Requeue))
            .await
            .unwrap();
        drop(stream);
        count(&mut acked, at_work.as_ref());
        within("ack the one at work", at_work.ack()).await.unwrap();
    }
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    within("every job", async {
        while acked.len() < JOBS as usize {
            let delivery = stream.next().await.unwrap().unwrap();
            count(&mut acked, delivery.as_ref());
            delivery.ack().await.unwrap();
        }
    })
    .await;
    // Nothing more comes: no job was left twice.
    let extra = tokio::time::timeout(Duration::from_millis(500), stream.next()).await;
    assert!(extra.is_err(), "a job came once more: {extra:?}");
    assert!(acked.values().all(|n| *n == 1), "{acked:?}");
    assert!(ids.iter().all(|id| acked.contains_key(id)));
    within("nothing left", async {
        while broker.ready_and_unacked(&q).await != Some((0, 0)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(broker.ready(&format!("{q}.suspect")).await, 0);
    assert_eq!(broker.ready(&format!("{q}.dead")).await, 0);
    assert!(guard_notices_mentioning(&q).is_empty());
    drop(stream);
    backend.close().await.unwrap();
}
