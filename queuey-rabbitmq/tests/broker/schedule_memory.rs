//! A schedule's last tick survives any number of leader changes, and a
//! state message the broker lost: each new leader publishes the state
//! afresh, and a process that finds none recovers the last tick from the
//! status queue.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, QueuePurgeOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use queuey_core::periodic::Leadership;
use queuey_rabbitmq::topology::{SAFE_DELIVERY_LIMIT, SINGLE_ACTIVE_CONSUMER};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::{Broker, within};

/// A schedule queue's arguments, with or without the delivery limit.
fn schedule_arguments(limit: Option<i64>) -> FieldTable {
    let mut table = FieldTable::default();
    table.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    table.insert(SINGLE_ACTIVE_CONSUMER.into(), AMQPValue::Boolean(true));
    if let Some(limit) = limit {
        table.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongInt(i32::try_from(limit).unwrap()),
        );
    }
    table
}

async fn connect(broker: &Broker, label: &str) -> RabbitMqBackend {
    let options =
        broker.isolate(RabbitMqOptions::default().connection_name(broker.connection_name(label)));
    within(
        "backend connects",
        RabbitMqBackend::with_options(broker.url.clone(), options),
    )
    .await
    .expect("backend connects")
}

/// A tick in the past, in whole milliseconds.
fn a_past_tick() -> SystemTime {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    UNIX_EPOCH + Duration::from_millis(u64::try_from(now).unwrap() - 60_000)
}

#[tokio::test]
async fn a_schedule_keeps_its_last_tick_through_a_hundred_leader_changes() {
    let broker = broker!("a_schedule_keeps_its_last_tick_through_a_hundred_leader_changes");
    let key = format!("{}.periodic.beat", broker.queue("changes"));
    // The queue as a build before delivery limits left it: RabbitMQ 4 gives
    // it a limit of 20, and every change of leader returns the state once.
    broker
        .declare_raw(&key, true, schedule_arguments(None))
        .await
        .expect("an older schedule queue");
    let a = connect(&broker, "a").await;
    let b = connect(&broker, "b").await;

    let mut leader = within("a leads", a.lead(&key)).await.expect("a leads");
    assert_eq!(leader.last_tick(), None);
    let tick = a_past_tick();
    within("record", leader.record(tick))
        .await
        .expect("recorded");
    // No status is announced: only the state message carries the tick.
    for change in 0..100 {
        let next = if change % 2 == 0 {
            b.clone()
        } else {
            a.clone()
        };
        let key_next = key.clone();
        let waiting = tokio::spawn(async move { next.lead(&key_next).await });
        leader.release().await;
        leader = within("the next leader takes over", waiting)
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("change {change}: {e}"));
        assert_eq!(
            leader.last_tick(),
            Some(tick),
            "after change {}",
            change + 1
        );
    }
    leader.release().await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test]
async fn a_new_schedule_queue_has_the_safe_delivery_limit() {
    let broker = broker!("a_new_schedule_queue_has_the_safe_delivery_limit");
    let key = format!("{}.periodic.beat", broker.queue("limit"));
    let backend = connect(&broker, "backend").await;
    let lease = within("lead", backend.lead(&key)).await.expect("leads");
    // RabbitMQ accepts a declaration only with the queue's own arguments.
    broker
        .declare_raw(&key, true, schedule_arguments(Some(SAFE_DELIVERY_LIMIT)))
        .await
        .expect("the schedule queue has x-delivery-limit = SAFE_DELIVERY_LIMIT");
    lease.release().await;
    backend.close().await.unwrap();
}

#[tokio::test]
async fn a_lost_state_is_recovered_from_the_status_queue() {
    let broker = broker!("a_lost_state_is_recovered_from_the_status_queue");
    let key = format!("{}.periodic.beat", broker.queue("lost"));
    let backend = connect(&broker, "backend").await;
    let mut lease = within("lead", backend.lead(&key)).await.expect("leads");
    let tick = a_past_tick();
    within("record", lease.record(tick))
        .await
        .expect("recorded");
    within(
        "announce",
        lease.announce(Some(tick + Duration::from_secs(60)), "every 1m"),
    )
    .await
    .expect("announced");
    lease.release().await;
    // The state message is gone; the status queue still has the tick.
    let channel = broker.channel().await;
    within(
        "purge",
        channel.queue_purge(key.as_str().into(), QueuePurgeOptions::default()),
    )
    .await
    .expect("purged");
    let lease = within("lead again", backend.lead(&key))
        .await
        .expect("leads");
    assert_eq!(lease.last_tick(), Some(tick));
    lease.release().await;
    backend.close().await.unwrap();
}

#[tokio::test]
async fn a_waiting_candidate_leads_with_the_last_tick_when_the_state_is_lost() {
    let broker = broker!("a_waiting_candidate_leads_with_the_last_tick_when_the_state_is_lost");
    let key = format!("{}.periodic.beat", broker.queue("waiting"));
    let a = connect(&broker, "a").await;
    let b = connect(&broker, "b").await;
    let mut first = within("a leads", a.lead(&key)).await.expect("a leads");
    let tick = a_past_tick();
    within("record", first.record(tick))
        .await
        .expect("recorded");
    within("announce", first.announce(None, "every 1m"))
        .await
        .expect("announced");
    // Second in line: a consumer that takes the state and acknowledges it,
    // as if the broker had dropped it.
    let thief = broker.channel().await;
    let mut stolen = within(
        "consume",
        thief.basic_consume(
            key.as_str().into(),
            ShortString::from("thief"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        ),
    )
    .await
    .expect("consume");
    // Third in line: b.
    let key_b = key.clone();
    let other = b.clone();
    let waiting = tokio::spawn(async move { other.lead(&key_b).await });
    within(
        "a holds while b joins",
        first.hold_until(tokio::time::Instant::now() + Duration::from_millis(500)),
    )
    .await
    .expect("a still leads");
    first.release().await;
    let delivery = within("the thief receives the state", stolen.next())
        .await
        .expect("a delivery")
        .expect("a delivery");
    delivery
        .acker
        .ack(BasicAckOptions::default())
        .await
        .expect("ack");
    thief.close(200, "gone".into()).await.expect("close");
    // b is the active consumer with nothing to receive; it looks, and leads.
    let second = within("b takes over", waiting)
        .await
        .unwrap()
        .expect("b leads");
    assert_eq!(second.last_tick(), Some(tick));
    second.release().await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}
