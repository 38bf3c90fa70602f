//! Leadership of periodic schedules: one single-active-consumer quorum
//! queue per schedule, its state message held by the leader.

use std::time::{Duration, UNIX_EPOCH};

use lapin::BasicProperties;
use queuey_core::periodic::Leadership;
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::{Broker, within};

/// Waits until the broker lists one state message on `key`, held
/// unacknowledged (a quorum queue's listing lags by a few seconds).
async fn held_once(broker: &Broker, key: &str) {
    within(&format!("one state message held on {key}"), async {
        while broker.ready_and_unacked(key).await != Some((0, 1)) {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn one_leader_at_a_time_and_the_next_learns_the_last_tick() {
    let broker = broker!("one_leader_at_a_time_and_the_next_learns_the_last_tick");
    let key = format!("{}.periodic.beat", broker.queue("leader"));
    let connect = |label: &str| {
        RabbitMqBackend::with_options(
            broker.url.clone(),
            RabbitMqOptions::default().connection_name(broker.connection_name(label)),
        )
    };
    let a = within("a connects", connect("a"))
        .await
        .expect("a connects");
    let b = within("b connects", connect("b"))
        .await
        .expect("b connects");

    let mut first = within("a leads", a.lead(&key)).await.expect("a leads");
    assert_eq!(first.last_tick(), None);
    let other = b.clone();
    let key_b = key.clone();
    let waiting = tokio::spawn(async move { other.lead(&key_b).await });
    // b waits in line while a holds the lease and records ticks.
    let tick = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for n in 0..3 {
        within("record", first.record(tick + Duration::from_secs(n)))
            .await
            .expect("recorded");
    }
    within(
        "hold",
        first.hold_until(tokio::time::Instant::now() + Duration::from_millis(300)),
    )
    .await
    .expect("still leading");
    assert!(!waiting.is_finished(), "two leaders at once");
    // One state message, held by the leader; the joiner's first state was folded away.
    held_once(&broker, &key).await;

    first.release().await;
    let second = within("b takes over", waiting)
        .await
        .unwrap()
        .expect("b leads");
    assert_eq!(second.last_tick(), Some(tick + Duration::from_secs(2)));
    second.release().await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test]
async fn extra_state_messages_fold_to_the_latest_tick() {
    let broker = broker!("extra_state_messages_fold_to_the_latest_tick");
    let key = format!("{}.periodic.beat", broker.queue("fold"));
    let backend = broker.backend(RabbitMqOptions::default()).await;
    // The queue as a crash between publishing and acknowledging leaves it
    // (the states signed by the backend's own user, as a leader signs them).
    let first = within("lead", backend.lead(&key)).await.expect("leads");
    first.release().await;
    for ms in [5_000u64, 9_000, 7_000] {
        let body = format!(r#"{{"v":1,"last_tick_ms":{ms}}}"#);
        broker
            .publish_raw(
                &key,
                body.as_bytes(),
                BasicProperties::default().with_user_id("guest".into()),
            )
            .await;
    }
    let lease = within("lead again", backend.lead(&key))
        .await
        .expect("leads");
    assert_eq!(lease.last_tick(), Some(UNIX_EPOCH + Duration::from_secs(9)));
    held_once(&broker, &key).await;
    lease.release().await;
    backend.close().await.unwrap();
}

#[tokio::test]
async fn a_closed_connection_ends_the_lease() {
    let broker = broker!("a_closed_connection_ends_the_lease");
    let key = format!("{}.periodic.beat", broker.queue("closed"));
    let backend = broker
        .backend(RabbitMqOptions::default().reconnect_deadline(Some(Duration::ZERO)))
        .await;
    let mut lease = within("lead", backend.lead(&key)).await.expect("leads");
    broker
        .close_connection(&broker.connection_name("backend"))
        .await;
    let held = within(
        "hold",
        lease.hold_until(tokio::time::Instant::now() + Duration::from_secs(15)),
    )
    .await;
    assert!(held.is_err(), "the lease outlived its connection");
    lease.release().await;
}
