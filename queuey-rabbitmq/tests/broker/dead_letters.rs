//! Dead letters and header hygiene on every republish.

use queuey_core::Disposition;
use std::time::Duration;

use futures::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable};
use queuey_core::QueueConfig;
use queuey_core::backend::Backend;
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{envelope, header, header_names, n_of, table, text, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_carry_their_headers_and_the_body_verbatim() {
    let broker = broker!("dead_letters_carry_their_headers_and_the_body_verbatim");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("dead");
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut job = envelope(&q, 5);
    job.attempt = 3;
    let body = job.encode().unwrap();
    within("publish", backend.publish(&job)).await.unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let delivery = within("delivery", stream.next()).await.unwrap().unwrap();
    let reason = format!("boom: {}", "é".repeat(5_000));
    within(
        "dead_letter",
        delivery.settle(Disposition::DeadLetter {
            reason: reason.clone(),
        }),
    )
    .await
    .unwrap();

    let dead = format!("{q}.dead");
    let copy = broker.get(&dead).await.expect("a dead letter");
    assert_eq!(copy.delivery.data, body, "the body was not kept verbatim");
    let stored = header(&copy, "x-death-reason").unwrap();
    assert!(
        stored.len() <= 4096 && stored.len() >= 4000,
        "reason of {} bytes",
        stored.len()
    );
    assert!(reason.starts_with(&stored));
    assert_eq!(
        header(&copy, "x-original-queue").as_deref(),
        Some(q.as_str())
    );
    assert_eq!(header(&copy, "x-attempts").as_deref(), Some("i64:3"));
    assert_eq!(*copy.delivery.properties.delivery_mode(), Some(2));
    drop(stream);
    broker.wait_ready(&q, 0).await;
}

/// A delivery carrying `CC`, `BCC` and forged death headers is retried,
/// deferred and dead-lettered; no republish carries them, so nothing more
/// reaches the queues they name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn republishes_never_carry_cc_bcc_or_death_headers() {
    let broker = broker!("republishes_never_carry_cc_bcc_or_death_headers");
    let backend = broker
        .backend(RabbitMqOptions::default().deferred_granularity(Duration::from_millis(100)))
        .await;
    let q = broker.queue("hygiene");
    broker.hold(&q, 200);
    let cc_victim = broker.queue("cc-victim");
    let bcc_victim = broker.queue("bcc-victim");
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    for victim in [&cc_victim, &bcc_victim] {
        broker.declare_raw(victim, true, table(&[])).await.unwrap();
    }

    let mut headers = FieldTable::default();
    headers.insert(
        "CC".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![text(&cc_victim)])),
    );
    headers.insert(
        "BCC".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![text(&bcc_victim)])),
    );
    headers.insert(
        "x-death".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![text("forged")])),
    );
    headers.insert("x-first-death-queue".into(), text("forged"));
    headers.insert("x-last-death-queue".into(), text("forged"));
    let job = envelope(&q, 1);
    broker
        .publish_raw(
            &q,
            &job.encode().unwrap(),
            BasicProperties::default().with_headers(headers),
        )
        .await;
    // The raw publish itself reaches both victims once.
    assert_eq!(
        (
            broker.ready(&cc_victim).await,
            broker.ready(&bcc_victim).await
        ),
        (1, 1)
    );

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    // Retry at once (no hold), then defer through a hold, then dead-letter.
    let d = within("delivery", stream.next()).await.unwrap().unwrap();
    within(
        "retry",
        d.settle(Disposition::Retry {
            delay: Duration::ZERO,
        }),
    )
    .await
    .unwrap();
    let d = within("retried", stream.next()).await.unwrap().unwrap();
    assert_eq!(d.envelope().attempt, 2);
    within(
        "defer",
        d.settle(Disposition::Defer {
            delay: Duration::from_millis(150),
        }),
    )
    .await
    .unwrap();
    let d = within("deferred", stream.next()).await.unwrap().unwrap();
    assert_eq!((n_of(d.envelope()), d.envelope().deferrals), (1, 1));
    within(
        "dead_letter",
        d.settle(Disposition::DeadLetter {
            reason: "done".into(),
        }),
    )
    .await
    .unwrap();

    let copy = broker.get(&format!("{q}.dead")).await.expect("dead letter");
    assert_eq!(
        header_names(&copy),
        [
            "x-attempts",
            "x-death-reason",
            "x-died-at",
            "x-original-queue"
        ],
        "only queuey's own headers"
    );
    assert_eq!(
        (
            broker.ready(&cc_victim).await,
            broker.ready(&bcc_victim).await
        ),
        (1, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_dead_letter_queues_the_brokers_policy_applies() {
    let broker = broker!("without_dead_letter_queues_the_brokers_policy_applies");
    let backend = broker
        .backend(RabbitMqOptions::default().declare_dead_letter_queues(false))
        .await;
    // declare creates no dead-letter queue.
    let declared = broker.queue("no-dlq");
    within("declare", backend.declare(&[QueueConfig::new(&declared)]))
        .await
        .unwrap();
    assert!(broker.exists(&declared).await);
    assert!(!broker.exists(&format!("{declared}.dead")).await);

    // A queue whose owner set its own dead-lettering: rejected jobs go there.
    let q = broker.queue("own-dlx");
    let own_dlq = broker.queue("own-dlq");
    broker
        .declare_raw(&own_dlq, true, table(&[]))
        .await
        .unwrap();
    let args = [
        ("x-dead-letter-exchange", text("")),
        ("x-dead-letter-routing-key", text(&own_dlq)),
    ];
    broker.declare_raw(&q, true, table(&args)).await.unwrap();
    let job = envelope(&q, 1);
    within("publish", backend.publish(&job)).await.unwrap();

    let mut stream = within("consume", backend.consume(&QueueConfig::new(&q)))
        .await
        .unwrap();
    let d = within("delivery", stream.next()).await.unwrap().unwrap();
    within(
        "dead_letter",
        d.settle(Disposition::DeadLetter {
            reason: "no good".into(),
        }),
    )
    .await
    .unwrap();
    broker.wait_ready(&own_dlq, 1).await;
    let got = broker.get(&own_dlq).await.unwrap();
    assert_eq!(got.delivery.data, job.encode().unwrap());
    assert!(
        header(&got, "x-death-reason").is_none(),
        "queuey published instead of rejecting"
    );
    assert!(
        header(&got, "x-death").is_some(),
        "not dead-lettered by the broker"
    );
    assert!(!broker.exists(&format!("{q}.dead")).await);
}

/// The suffixes are part of the names: `dead_suffix("-dlq")` puts dead
/// letters in `{q}-dlq`, and `deferred_suffix(".wait")` names hold queues
/// `{q}.wait.{ttl}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_suffixes_name_the_dead_letter_and_hold_queues() {
    let broker = broker!("custom_suffixes_name_the_dead_letter_and_hold_queues");
    let options = RabbitMqOptions::default()
        .dead_suffix("-dlq")
        .deferred_suffix(".wait");
    let backend = broker.backend(options).await;
    let q = broker.queue("suffixes");
    let dlq = format!("{q}-dlq");
    let hold = format!("{q}.wait.quorum.1000");
    broker.track(&dlq);
    broker.track(&hold);
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    assert!(broker.exists(&dlq).await);
    assert!(!broker.exists(&format!("{q}.dead")).await);

    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(400)),
    )
    .await
    .unwrap();
    assert!(broker.exists(&hold).await, "{hold} holds the delayed job");
    broker.wait_ready(&q, 1).await;

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let delivery = within("delivery", stream.next()).await.unwrap().unwrap();
    assert_eq!(n_of(delivery.envelope()), 1);
    within(
        "dead_letter",
        delivery.settle(Disposition::DeadLetter {
            reason: "no good".into(),
        }),
    )
    .await
    .unwrap();
    let copy = broker.get(&dlq).await.expect("a dead letter in {q}-dlq");
    assert_eq!(header(&copy, "x-death-reason").as_deref(), Some("no good"));
}

/// When the dead-letter queue is gone (an operator deleted it), a dead
/// letter and the verbatim copy of a malformed body come back `NO_ROUTE`;
/// the backend declares the dead-letter queue once and publishes again, so
/// both land there and both deliveries are acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_dead_letter_queue_is_declared_again() {
    let broker = broker!("a_deleted_dead_letter_queue_is_declared_again");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("dead-gone");
    let dead = format!("{q}.dead");
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let job = envelope(&q, 1);
    within("publish", backend.publish(&job)).await.unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let delivery = within("delivery", stream.next()).await.unwrap().unwrap();

    broker.delete_raw(&dead).await;
    assert!(!broker.exists(&dead).await);
    within(
        "dead_letter",
        delivery.settle(Disposition::DeadLetter {
            reason: "gave up".into(),
        }),
    )
    .await
    .expect("the dead letter lands in the declared-again queue");
    let copy = broker.get(&dead).await.expect("a dead letter");
    assert_eq!(copy.delivery.data, job.encode().unwrap());

    broker.delete_raw(&dead).await;
    let garbage = b"\x00 not an envelope".to_vec();
    broker
        .publish_raw(
            &q,
            &garbage,
            BasicProperties::default().with_delivery_mode(2),
        )
        .await;
    // The stream handles the malformed body on its way to the next job;
    // with prefetch 1 that job arrives only once the malformed one was
    // acknowledged.
    within("publish", backend.publish(&envelope(&q, 2)))
        .await
        .unwrap();
    let next = within("delivery", stream.next()).await.unwrap().unwrap();
    assert_eq!(n_of(next.envelope()), 2);
    let copy = broker.get(&dead).await.expect("the malformed copy");
    assert_eq!(copy.delivery.data, garbage);
    within("ack", next.ack()).await.unwrap();
}
