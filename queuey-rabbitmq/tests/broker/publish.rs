//! Publishing: confirms, returns, nacks, properties, the size check and the
//! confirm/return attribution under load.

use std::sync::Arc;
use std::time::Duration;

use lapin::types::AMQPValue;
use queuey_core::backend::Backend;
use queuey_core::{BackendErrorKind, Error, MAX_MESSAGE_BYTES, QueueConfig};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::{DeleteUser, Policy, envelope, kind, table, text, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_a_missing_queue_is_no_route() {
    let broker = broker!("a_publish_to_a_missing_queue_is_no_route");
    // As with Producer::new_undeclared: nothing declared, nothing there.
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let missing = broker.queue("missing");
    let e = within("publish", backend.publish(&envelope(&missing, 1)))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Unroutable);
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "broker returned the message published to `{missing}` as unroutable: 312 NO_ROUTE; "
        )),
        "{text}"
    );
    // What to do about it: the queue was never declared, and what declares it.
    assert!(
        text.contains(&format!(
            "the queue `{missing}` does not exist: it was never declared"
        )),
        "{text}"
    );
    assert!(
        text.contains("`WorkerBuilder::build`") && text.contains("`Producer::new_undeclared`"),
        "{text}"
    );
    assert!(!broker.exists(&missing).await);
}

/// A work queue this backend declared and an operator deleted since: the
/// `NO_ROUTE` error says so, rather than that it was never declared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_a_deleted_declared_queue_says_it_was_deleted() {
    let broker = broker!("a_publish_to_a_deleted_declared_queue_says_it_was_deleted");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("deleted");
    within(
        "declare",
        backend.declare(std::slice::from_ref(&QueueConfig::new(&q))),
    )
    .await
    .unwrap();
    broker.delete_raw(&q).await;
    let e = within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Unroutable);
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "broker returned the message published to `{q}` as unroutable: 312 NO_ROUTE; "
        )),
        "{text}"
    );
    assert!(text.contains("has been deleted since"), "{text}");
    assert!(!text.contains("never declared"), "{text}");
    within("close", backend.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_is_an_error() {
    let broker = broker!("a_nack_is_an_error");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("full");
    let args = [
        ("x-queue-type", text("classic")),
        ("x-max-length", AMQPValue::LongInt(1)),
        ("x-overflow", text("reject-publish")),
    ];
    broker.declare_raw(&q, true, table(&args)).await.unwrap();
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .expect("first fits");
    let e = within("publish", backend.publish(&envelope(&q, 2)))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Nacked);
    assert_eq!(
        e.to_string(),
        format!("broker nacked the message published to `{q}`")
    );
}

/// A quorum queue that refused a publisher while over its length limit
/// can go on refusing that publisher's channel after the limit is lifted
/// (RabbitMQ 3.10 does, for good, while it accepts a fresh channel at
/// once). After a nack the lane publishes on a fresh channel, so publishing
/// works again as soon as the queue has room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_refused_by_a_full_quorum_queue_is_replaced() {
    let broker = broker!("a_channel_refused_by_a_full_quorum_queue_is_replaced");
    // One lane: every publish goes through the channel that was refused.
    let backend = broker
        .backend(RabbitMqOptions::default().publish_concurrency(1))
        .await;
    let q = broker.queue("refusing");
    let args = [
        ("x-queue-type", text("quorum")),
        ("x-overflow", text("reject-publish")),
    ];
    broker.declare_raw(&q, true, table(&args)).await.unwrap();
    within("publish", backend.publish(&envelope(&q, 0)))
        .await
        .expect("accepted before the policy");
    let mut stored = 1;

    let policy = Policy::on_queue(&broker, &q, r#"{"max-length":0}"#).await;
    // The policy takes a moment to reach the queue.
    let refused = within("a refused publish", async {
        loop {
            match backend.publish(&envelope(&q, 1)).await {
                Err(e) => break e,
                Ok(()) => {
                    stored += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
    .await;
    assert_eq!(kind(&refused), BackendErrorKind::Nacked, "{refused}");

    drop(policy);
    // The policy's removal takes a moment to reach the queue too.
    within("a publish accepted again", async {
        loop {
            match backend.publish(&envelope(&q, 2)).await {
                Ok(()) => break,
                Err(e) => {
                    assert_eq!(kind(&e), BackendErrorKind::Nacked, "{e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
    .await;
    stored += 1;
    for n in 3..23 {
        within("publish", backend.publish(&envelope(&q, n)))
            .await
            .expect("accepted after the limit was lifted");
        stored += 1;
    }
    broker.wait_ready(&q, stored).await;
    within("close", backend.close()).await.unwrap();
}

/// A job carries persistence, its job id and its priority, nothing else;
/// a job of priority 0 carries no priority, and one published to a queue
/// without priorities carries none either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn properties_on_the_wire() {
    let broker = broker!("properties_on_the_wire");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("props");
    let plain = broker.queue("props-plain");
    within(
        "declare",
        backend.declare(&[
            QueueConfig::new(&q),
            QueueConfig::new(&plain).max_priority(0),
        ]),
    )
    .await
    .unwrap();
    let job = envelope(&q, 1).with_priority(3);
    within("publish", backend.publish(&job)).await.unwrap();
    let msg = broker.get(&q).await.expect("message");
    let p = &msg.delivery.properties;
    assert_eq!(*p.delivery_mode(), Some(2));
    assert_eq!(
        p.message_id().as_ref().map(|s| s.to_string()),
        Some(job.job_id.to_string())
    );
    assert_eq!(*p.priority(), Some(3));
    assert!(p.content_type().is_none());
    assert!(p.kind().is_none());
    assert!(p.timestamp().is_none());
    assert!(p.headers().is_none());
    assert_eq!(msg.delivery.data, job.encode().unwrap());

    within("publish", backend.publish(&envelope(&q, 2)))
        .await
        .unwrap();
    let msg = broker.get(&q).await.expect("message");
    assert_eq!(*msg.delivery.properties.priority(), None);

    within(
        "publish",
        backend.publish(&envelope(&plain, 3).with_priority(5)),
    )
    .await
    .unwrap();
    let msg = broker.get(&plain).await.expect("message");
    assert_eq!(*msg.delivery.properties.priority(), None);
    assert_eq!(*msg.delivery.properties.delivery_mode(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_body_is_refused_before_publishing() {
    let broker = broker!("an_oversize_body_is_refused_before_publishing");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .publish_concurrency(1)
                .max_message_size(4096),
        )
        .await;
    let q = broker.queue("oversize");
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();

    let payload = serde_json::value::to_raw_value(&"x".repeat(8192)).unwrap();
    let big = queuey_core::Envelope::new("t", q.as_str(), payload);
    let e = within("publish", backend.publish(&big)).await.unwrap_err();
    assert!(
        matches!(e, Error::MessageTooLarge { ref queue, limit: 4096, size } if *queue == q && size > 8192),
        "{e:?}"
    );
    // A hold checks the size before it declares the hold queue.
    let e = within(
        "publish_after",
        backend.publish_after(&big, Duration::from_secs(1)),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::MessageTooLarge { .. }), "{e:?}");
    assert!(!broker.exists(&broker.hold(&q, 1_000)).await);
    // The single publishing channel is still usable.
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .expect("next publish works");
    assert_eq!(broker.ready(&q).await, 1);

    // The default limit is RabbitMQ 4's 16 MiB.
    let default = broker.backend(RabbitMqOptions::default()).await;
    let payload = serde_json::value::to_raw_value(&"x".repeat(MAX_MESSAGE_BYTES)).unwrap();
    let huge = queuey_core::Envelope::new("t", q.as_str(), payload);
    let e = within("publish", default.publish(&huge)).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::MessageTooLarge {
                limit: MAX_MESSAGE_BYTES,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(broker.ready(&q).await, 1);
}

/// A publishing channel closed by a channel exception is reopened on next
/// use.
///
/// The exception is the broker refusing a publish (`ACCESS_REFUSED`) to a
/// user of this test's own that may not write to the default exchange yet;
/// the permission is granted after that first publish. Nothing broker-wide
/// changes, so tests running alongside are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publishing_channel_closed_by_the_broker_is_reopened() {
    let broker = broker!("a_publishing_channel_closed_by_the_broker_is_reopened");
    let q = broker.queue("reopen");
    broker.declare_raw(&q, true, table(&[])).await.unwrap();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let user = format!("queuey-test-reopen-{id}");
    broker.rabbitmqctl(&["add_user", &user, &id]).await;
    let _user_cleanup = DeleteUser(user.clone());
    // Access to the virtual host, but no permission at all yet.
    broker
        .rabbitmqctl(&["set_permissions", "-p", "/", &user, "", "", ""])
        .await;
    let options = RabbitMqOptions::default()
        .publish_concurrency(1)
        .connection_name(broker.connection_name("reopen"));
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(&broker.url_as(&user, &id), options),
    )
    .await
    .expect("the test's user connects");

    let e = within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
    assert!(e.to_string().contains("ACCESS_REFUSED"), "{e}");
    broker
        .rabbitmqctl(&[
            "set_permissions",
            "-p",
            "/",
            &user,
            "",
            "^amq\\.default$",
            "",
        ])
        .await;
    // The next publish gets a new channel, which sees the new permission.
    within("publish", backend.publish(&envelope(&q, 2)))
        .await
        .expect("the publishing channel was reopened");
    assert_eq!(broker.ready(&q).await, 1);
    assert!(backend.is_connected());
    within("close", backend.close()).await.unwrap();
}

/// The confirm/return trap: with several publishes in flight on one confirm
/// channel, lapin can hand a return to the wrong publish (or an ack to the
/// wrong message). Thousands of concurrent publishes from many tasks, one in
/// ten unroutable, through a single publishing channel and through the
/// default lanes: each unroutable one must fail and each routable one
/// succeed.
///
/// With lapin's own attribution (a return belongs to the confirmation that
/// carried it) instead of the publisher's sweep by message id, this fails
/// with a few to a few dozen wrong outcomes per 2,000 publishes; 6,000 make
/// a miss unlikely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_never_misattribute_returns() {
    let broker = broker!("concurrent_publishes_never_misattribute_returns");
    for channels in [
        1,
        RabbitMqOptions::default().settings().publish_concurrency(),
    ] {
        let options = RabbitMqOptions::default().publish_concurrency(channels);
        stress(&broker, options, &format!("stress-{channels}")).await;
    }
}

async fn stress(broker: &crate::support::Broker, options: RabbitMqOptions, label: &str) {
    const TOTAL: u32 = 6_000;
    const EVERY: u32 = 10;
    const TASKS: u32 = 200;
    let backend = Arc::new(broker.backend(options).await);
    let q = broker.queue(label);
    let missing = broker.queue(&format!("{label}-missing"));
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();

    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let backend = Arc::clone(&backend);
        let (q, missing) = (q.clone(), missing.clone());
        tasks.push(tokio::spawn(async move {
            let mut wrong = Vec::new();
            for n in (t..TOTAL).step_by(TASKS as usize) {
                let unroutable = n % EVERY == 0;
                let target = if unroutable { &missing } else { &q };
                let result = backend.publish(&envelope(target, n)).await;
                match (unroutable, &result) {
                    (false, Ok(())) => {}
                    (true, Err(e)) if kind(e) == BackendErrorKind::Unroutable => {}
                    _ => wrong.push((n, format!("{result:?}"))),
                }
            }
            wrong
        }));
    }
    let mut wrong = Vec::new();
    for task in tasks {
        wrong.extend(within("publisher task", task).await.unwrap());
    }
    let elapsed = started.elapsed();
    assert!(
        wrong.is_empty(),
        "{label}: {} wrong: {wrong:?}",
        wrong.len()
    );
    assert_eq!(broker.ready(&q).await, TOTAL - TOTAL / EVERY);
    eprintln!(
        "{label}: {TOTAL} publishes ({} unroutable) in {elapsed:?}",
        TOTAL / EVERY
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_abandoned_before_its_confirm_cannot_hand_its_return_to_the_next() {
    let broker =
        broker!("a_publish_abandoned_before_its_confirm_cannot_hand_its_return_to_the_next");
    // One channel, so a reused channel would be the same channel every time.
    let backend = broker
        .backend(RabbitMqOptions::default().publish_concurrency(1))
        .await;
    let q = broker.queue("after-abandon");
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let missing = broker.queue("missing");
    for polls in 1..=12 {
        // Start an unroutable publish and give it up after a few polls, at
        // different points between `basic.publish` and its confirmation.
        let unroutable = envelope(&missing, polls);
        let mut abandoned = backend.publish(&unroutable);
        for _ in 0..polls {
            if futures::poll!(abandoned.as_mut()).is_ready() {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(abandoned);
        // The next publish is routable and must be reported as stored.
        within("publish", backend.publish(&envelope(&q, polls)))
            .await
            .unwrap_or_else(|e| panic!("after abandoning at {polls} polls: {e}"));
    }
    broker.wait_ready(&q, 12).await;
}
