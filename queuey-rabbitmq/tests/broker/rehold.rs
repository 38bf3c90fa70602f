//! Never early, whatever the hold queue did: a job back from its hold before
//! its due time (an operator policy shortened the hold queues' TTL) is held
//! again for the rest; one back a moment early waits for that moment
//! instead of a whole hold; delays past one hold are held in legs; a
//! due-time header that is garbage never makes a job run early, loop or
//! panic.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString};
use queuey_core::backend::Backend;
use queuey_core::{Error, QueueConfig};
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{Policy, envelope, header, n_of, within};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_shortens_holds_never_releases_a_job_early() {
    let broker = broker!("a_policy_that_shortens_holds_never_releases_a_job_early");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("rehold");
    for ms in (1..=4).map(|s| s * 1_000) {
        broker.hold(&q, ms);
    }
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    // Every hold queue of `q` now releases its jobs after 1 s, whatever its
    // own TTL says.
    let _policy = Policy::on_holds(&broker, &q, r#"{"message-ttl":1000}"#).await;
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();

    let started = Instant::now();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 7), Duration::from_secs(4)),
    )
    .await
    .unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the job comes back")
        .unwrap()
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4),
        "released {waited:?} after the publish, before its 4 s"
    );
    assert_eq!(n_of(delivery.envelope()), 7);
    assert_eq!(
        delivery.envelope().attempt,
        1,
        "a re-hold spends no attempt"
    );
    within("ack", delivery.ack()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_due_times_never_run_a_job_early_loop_or_panic() {
    let broker = broker!("garbage_due_times_never_run_a_job_early_loop_or_panic");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("due-garbage");
    let config = QueueConfig::new(&q).prefetch(4);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let twenty_years = now_ms() + 20 * 365 * 86_400_000;
    let cases = [
        (1, AMQPValue::LongString(LongString::from("tomorrow"))),
        (2, AMQPValue::LongLongInt(-5)),
        (3, AMQPValue::LongLongInt(now_ms() - 1_000)),
        (4, AMQPValue::LongLongInt(twenty_years)),
    ];
    for (n, value) in cases {
        let mut headers = FieldTable::default();
        headers.insert("queuey-due-at".into(), value);
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_headers(headers);
        let body = envelope(&q, n).encode().unwrap();
        broker.publish_raw(&q, &body, props).await;
    }
    // Not a number, negative, or past: due now.
    let mut seen = Vec::new();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    for _ in 0..3 {
        let d = within("delivery", stream.next()).await.unwrap().unwrap();
        seen.push(n_of(d.envelope()));
        within("ack", d.ack()).await.unwrap();
    }
    seen.sort();
    assert_eq!(seen, vec![1, 2, 3]);
    // Twenty years ahead: dead-lettered with a reason, not parked (while the
    // stream is polled for a next job, which never comes).
    let polling = tokio::spawn(async move { stream.next().await.map(|d| d.is_ok()) });
    let dead = format!("{q}.dead");
    broker.wait_ready(&dead, 1).await;
    polling.abort();
    let msg = broker.get(&dead).await.unwrap();
    let reason = header(&msg, "x-death-reason").unwrap();
    assert!(reason.contains("queuey-due-at"), "{reason}");
    assert!(
        broker
            .queues_starting_with(&format!("{q}.deferred."))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_past_one_hold_is_held_in_legs_or_refused_on_request() {
    let broker = broker!("a_delay_past_one_hold_is_held_in_legs_or_refused_on_request");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("legs");
    let first_leg = broker.hold(&q, 24 * 86_400_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let thirty_days = Duration::from_secs(30 * 86_400);
    let asked_at = now_ms();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), thirty_days),
    )
    .await
    .unwrap();
    // The first leg is the 24-day hold queue; the job carries its real due time.
    assert_eq!(broker.ready(&first_leg).await, 1);
    let msg = broker.get(&first_leg).await.unwrap();
    let due: i64 = header(&msg, "queuey-due-at")
        .unwrap()
        .trim_start_matches("i64:")
        .parse()
        .unwrap();
    let expected = asked_at + 30 * 86_400_000;
    assert!(
        (expected..expected + 60_000).contains(&due),
        "{due} vs {expected}"
    );

    // The first version's refusal, for whoever asks for it.
    let strict = broker
        .backend(RabbitMqOptions::default().refuse_long_delays(true))
        .await;
    within("declare", strict.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let e = within(
        "publish_after",
        strict.publish_after(&envelope(&q, 2), thirty_days),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::DelayTooLong { .. }), "{e:?}");
}

/// A job that arrives a few milliseconds before its due time (as a quorum
/// hold releases one now and then) waits those milliseconds and runs: it is
/// not held again, which would make it a whole hold step late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_a_moment_early_waits_for_that_moment_and_is_not_held_again() {
    let broker = broker!("a_job_a_moment_early_waits_for_that_moment_and_is_not_held_again");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("moment-early");
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    for n in 1..=5 {
        let due = now_ms() + 30;
        let mut headers = FieldTable::default();
        headers.insert("queuey-due-at".into(), AMQPValue::LongLongInt(due));
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_headers(headers);
        broker
            .publish_raw(&q, &envelope(&q, n).encode().unwrap(), props)
            .await;
        let delivery = within("the job", stream.next())
            .await
            .expect("the job comes")
            .unwrap();
        let ran = now_ms();
        assert!(ran >= due, "run {} ms before its due time", due - ran);
        assert_eq!(n_of(delivery.envelope()), n);
        within("ack", delivery.ack()).await.unwrap();
    }
    let holds = broker.queues_starting_with(&format!("{q}.deferred")).await;
    assert!(holds.is_empty(), "held again in {holds:?}");
}
