//! `declare`: the queues it creates, their arguments, and its refusals.

use queuey_core::Disposition;
use std::time::Duration;

use futures::StreamExt;
use lapin::types::AMQPValue;
use queuey_core::MAX_DEFERRAL_MS;
use queuey_core::backend::Backend;
use queuey_core::{BackendErrorKind, Error, QueueConfig};
use queuey_rabbitmq::{HoldQueues, RabbitMqOptions};

use crate::support::{envelope, kind, table, text, within};

fn is_precondition_failed(result: &Result<(), lapin::Error>) -> bool {
    match result {
        Err(e) => e.to_string().contains("PRECONDITION_FAILED"),
        Ok(()) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declare_is_idempotent_and_queues_have_the_documented_arguments() {
    let broker = broker!("declare_is_idempotent_and_queues_have_the_documented_arguments");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("args");
    let ttl_q = broker.queue("ttl");
    let configs = [
        QueueConfig::new(&q),
        QueueConfig::new(&ttl_q)
            .message_ttl(Duration::from_secs(60))
            .max_priority(3),
    ];
    within("declare", backend.declare(&configs))
        .await
        .expect("first declare");
    within("declare", backend.declare(&configs))
        .await
        .expect("declare is idempotent");

    let classic = ("x-queue-type", text("classic"));
    // An equivalent declaration is accepted; the broker compares values, not
    // integer widths, and refuses any difference with PRECONDITION_FAILED.
    let q_args = [
        classic.clone(),
        ("x-max-priority", AMQPValue::ShortShortUInt(10)),
    ];
    assert!(broker.declare_raw(&q, true, table(&q_args)).await.is_ok());
    let other = [
        classic.clone(),
        ("x-max-priority", AMQPValue::ShortShortUInt(5)),
    ];
    assert!(is_precondition_failed(
        &broker.declare_raw(&q, true, table(&other)).await
    ));
    let quorum = [
        ("x-queue-type", text("quorum")),
        ("x-max-priority", AMQPValue::ShortShortUInt(10)),
    ];
    assert!(broker.declare_raw(&q, true, table(&quorum)).await.is_err());
    assert!(is_precondition_failed(
        &broker.declare_raw(&q, false, table(&q_args)).await
    ));

    let ttl_args = [
        classic.clone(),
        ("x-message-ttl", AMQPValue::LongInt(60_000)),
        ("x-max-priority", AMQPValue::LongInt(3)),
    ];
    assert!(
        broker
            .declare_raw(&ttl_q, true, table(&ttl_args))
            .await
            .is_ok()
    );
    let shorter = [
        classic.clone(),
        ("x-message-ttl", AMQPValue::LongInt(30_000)),
        ("x-max-priority", AMQPValue::LongInt(3)),
    ];
    assert!(is_precondition_failed(
        &broker.declare_raw(&ttl_q, true, table(&shorter)).await
    ));

    // q.dead: the queue type only, durable like q.
    let dead = format!("{q}.dead");
    assert!(
        broker
            .declare_raw(&dead, true, table(std::slice::from_ref(&classic)))
            .await
            .is_ok()
    );
    let with_priority = [classic.clone(), ("x-max-priority", AMQPValue::LongInt(10))];
    assert!(is_precondition_failed(
        &broker.declare_raw(&dead, true, table(&with_priority)).await
    ));

    // The broker's own listing agrees: every queue is classic.
    let listing = broker
        .rabbitmqctl(&[
            "list_queues",
            "name",
            "type",
            "durable",
            "-q",
            "--no-table-headers",
        ])
        .await;
    for (name, durable) in [(&q, "true"), (&dead, "true"), (&ttl_q, "true")] {
        let line = listing
            .lines()
            .find(|l| l.split('\t').next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} not listed"));
        assert!(line.contains("classic"), "{line}");
        assert!(line.ends_with(durable), "{line}");
    }
}

/// The default (quorum) hold queue: durable, at-least-once release into
/// `q`, and no `x-expires`. The broker holds exactly these arguments: an
/// added lease or priority, or a transient declaration, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_queues_have_the_documented_arguments() {
    let broker = broker!("hold_queues_have_the_documented_arguments");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("hold-args");
    let hold = broker.hold(&q, 30_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    // 29.2 s rounds up to the 30 s hold queue (a 10 % bucket).
    let job = envelope(&q, 1);
    within(
        "publish_after",
        backend.publish_after(&job, Duration::from_millis(29_200)),
    )
    .await
    .expect("hold publish");

    // The broker's own record of the queue: exactly these arguments, and
    // durable. (RabbitMQ does not compare `x-expires` when a quorum queue
    // is declared again, so a redeclaration could not show its absence.)
    let line = broker
        .listed(&hold)
        .await
        .expect("the hold queue is listed");
    let expected = format!(
        "quorum\ttrue\t[{{\"x-dead-letter-exchange\",[]}},\
         {{\"x-dead-letter-routing-key\",\"{q}\"}},\
         {{\"x-dead-letter-strategy\",\"at-least-once\"}},{{\"x-message-ttl\",30000}},\
         {{\"x-overflow\",\"reject-publish\"}},{{\"x-queue-type\",\"quorum\"}}]"
    );
    assert_eq!(line, expected);
    // A priority is refused on a quorum queue.
    let prioritised = [
        ("x-queue-type", text("quorum")),
        ("x-max-priority", AMQPValue::LongInt(10)),
    ];
    assert!(is_precondition_failed(
        &broker.declare_raw(&hold, true, table(&prioritised)).await
    ));
    assert_eq!(broker.ready(&hold).await, 1);
}

/// `HoldQueues::Classic`, the first version's hold queue: `x-expires = 2 * ttl`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_hold_queues_have_the_documented_arguments() {
    let broker = broker!("classic_hold_queues_have_the_documented_arguments");
    let backend = broker
        .backend(RabbitMqOptions::default().hold_queues(HoldQueues::Classic))
        .await;
    let q = broker.queue("classic-hold-args");
    let hold = broker.classic_hold(&q, 30_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    // 29.2 s rounds up to the 30 s hold queue.
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(29_200)),
    )
    .await
    .expect("hold publish");

    let expected = [
        ("x-queue-type", text("classic")),
        ("x-message-ttl", AMQPValue::LongInt(30_000)),
        ("x-dead-letter-exchange", text("")),
        ("x-dead-letter-routing-key", text(&q)),
        ("x-expires", AMQPValue::LongInt(60_000)),
    ];
    assert!(
        broker
            .declare_raw(&hold, true, table(&expected))
            .await
            .is_ok()
    );
    let mut longer = expected.to_vec();
    longer[4] = ("x-expires", AMQPValue::LongInt(90_000));
    assert!(is_precondition_failed(
        &broker.declare_raw(&hold, true, table(&longer)).await
    ));
    let mut prioritised = expected.to_vec();
    prioritised.push(("x-max-priority", AMQPValue::LongInt(10)));
    assert!(is_precondition_failed(
        &broker.declare_raw(&hold, true, table(&prioritised)).await
    ));
    assert!(is_precondition_failed(
        &broker.declare_raw(&hold, false, table(&expected)).await
    ));
    assert_eq!(broker.ready(&hold).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_without_priorities_is_refused_and_publishing_still_works() {
    let broker = broker!("a_queue_without_priorities_is_refused_and_publishing_still_works");
    let backend = broker
        .backend(RabbitMqOptions::default().publish_concurrency(1))
        .await;
    let q = broker.queue("legacy");
    // A queue created before priorities existed: no x-max-priority.
    broker.declare_raw(&q, true, table(&[])).await.unwrap();

    let e = within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Refused);
    let text = e.to_string();
    assert!(text.contains("PRECONDITION_FAILED"), "{text}");
    assert!(text.contains("x-max-priority"), "{text}");
    assert!(text.contains("max_priority(0)"), "{text}");

    // The refusal closed only the declaring channel.
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .expect("publishing still works");
    assert_eq!(broker.ready(&q).await, 1);
    // max_priority(0) declares the queue as it was.
    within(
        "declare",
        backend.declare(&[QueueConfig::new(&q).max_priority(0)]),
    )
    .await
    .expect("max_priority(0) matches the old queue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_hold_queue_makes_retry_fail_and_the_delivery_stays_unacked() {
    let broker = broker!("a_foreign_hold_queue_makes_retry_fail_and_the_delivery_stays_unacked");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("foreign-hold");
    let hold = broker.hold(&q, 1_000);
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    // Someone else made the 1 s hold queue with other arguments.
    let foreign = [("x-message-ttl", AMQPValue::LongInt(5_000))];
    broker
        .declare_raw(&hold, true, table(&foreign))
        .await
        .unwrap();
    within("publish", backend.publish(&envelope(&q, 7)))
        .await
        .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let delivery = within("delivery", stream.next()).await.unwrap().unwrap();
    let e = within(
        "retry",
        delivery.settle(Disposition::Retry {
            delay: Duration::from_millis(400),
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Refused);
    assert!(
        e.to_string().contains(&format!("declaring queue `{hold}`")),
        "{e}"
    );
    assert!(e.to_string().contains("PRECONDITION_FAILED"), "{e}");

    // Nothing was acked: the message is unacknowledged on the consumer's channel.
    let listing = broker
        .rabbitmqctl(&[
            "list_queues",
            "name",
            "messages_unacknowledged",
            "-q",
            "--no-table-headers",
        ])
        .await;
    assert!(listing.lines().any(|l| l == format!("{q}\t1")), "{listing}");
    assert_eq!(broker.ready(&hold).await, 0);

    // A moment later it is handed back to the broker, which delivers it
    // again to the same consumer: the failure cost no prefetch slot.
    let redelivered = within("redelivery", stream.next()).await.unwrap().unwrap();
    assert!(redelivered.redelivered());
    assert_eq!(crate::support::n_of(redelivered.envelope()), 7);
    within("ack", redelivered.ack()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_happen_before_anything_is_created() {
    let broker = broker!("refusals_happen_before_anything_is_created");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .refuse_long_delays(true)
                .retry_granularity(Duration::from_secs(1)),
        )
        .await;

    // A hold onto a queue this backend did not declare.
    let q = broker.queue("unknown");
    broker.declare_raw(&q, true, table(&[])).await.unwrap();
    for result in [
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, 1), Duration::from_secs(1)),
        )
        .await,
        within(
            "defer",
            backend.defer(&envelope(&q, 1), Duration::from_secs(1)),
        )
        .await,
    ] {
        assert!(
            matches!(result, Err(Error::UnknownQueue { ref queue }) if *queue == q),
            "{result:?}"
        );
    }
    assert!(!broker.exists(&format!("{q}.deferred.quorum.1000")).await);

    // A delay over the cap once rounded up.
    let declared = broker.queue("too-long");
    within("declare", backend.declare(&[QueueConfig::new(&declared)]))
        .await
        .unwrap();
    let just_under = Duration::from_millis(queuey_core::MAX_DEFERRAL_MS - 10);
    let e = within(
        "publish_after",
        backend.publish_after(&envelope(&declared, 1), just_under),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::DelayTooLong {
                delay_ms: 2_147_484_000,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        !broker
            .exists(&format!("{declared}.deferred.quorum.2147484000"))
            .await
    );

    // A name that leaves no room for its hold queues: 234 + 27 = 261 bytes,
    // unique to this run like every other name.
    let prefix = format!("queuey-test.long.{}.", uuid::Uuid::new_v4().simple());
    let long = format!("{prefix}{}", "n".repeat(234 - prefix.len()));
    broker.track(&long);
    broker.track(&format!("{long}.dead"));
    assert_eq!(long.len(), 234);
    let ok = broker.queue("fine");
    let e = within(
        "declare",
        backend.declare(&[QueueConfig::new(&ok), QueueConfig::new(&long)]),
    )
    .await
    .unwrap_err();
    let expected = format!(
        "queue `{long}` leaves no room for its hold queues: `{long}.deferred.quorum.2147483647` is \
         261 bytes, over the 255-byte AMQP limit"
    );
    assert!(
        matches!(e, Error::InvalidConfig(ref m) if *m == expected),
        "{e}"
    );
    // Nothing was created, not even the valid queue before it.
    assert!(!broker.exists(&long).await);
    assert!(!broker.exists(&ok).await);
}

/// A refused hold declaration closes the hold-declaration channel; the next
/// hold opens a new one, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hold_declaration_channel_reopens_after_a_refusal() {
    let broker = broker!("the_hold_declaration_channel_reopens_after_a_refusal");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("hold-channel");
    let foreign = broker.hold(&q, 1_000);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let args = [("x-message-ttl", AMQPValue::LongInt(5_000))];
    broker
        .declare_raw(&foreign, true, table(&args))
        .await
        .unwrap();

    for ms in [2_000, 3_000] {
        let e = within(
            "publish_after",
            backend.publish_after(&envelope(&q, 1), Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
        assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("declaring queue `{foreign}`")),
            "{text}"
        );
        assert!(text.contains("PRECONDITION_FAILED"), "{text}");

        let hold = broker.hold(&q, ms);
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, 2), Duration::from_millis(ms)),
        )
        .await
        .expect("the next hold declares on a new channel");
        assert_eq!(broker.ready(&hold).await, 1);
    }
    assert_eq!(broker.ready(&foreign).await, 0);
}

/// The longest classic hold, `MAX_DEFERRAL_MS`, has an `x-expires` of twice that,
/// past `i32::MAX`: it goes out as a 64-bit integer, the broker takes it, and
/// it is the value the broker holds (an equal one is equivalent, any other is
/// refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_hold_has_an_x_expires_past_32_bits() {
    let broker = broker!("the_longest_hold_has_an_x_expires_past_32_bits");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .hold_queues(HoldQueues::Classic)
                .retry_granularity(Duration::from_millis(1))
                .refuse_long_delays(true),
        )
        .await;
    let q = broker.queue("longest");
    let hold = broker.classic_hold(&q, MAX_DEFERRAL_MS);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(MAX_DEFERRAL_MS)),
    )
    .await
    .expect("the longest hold");

    let expires = 2 * MAX_DEFERRAL_MS;
    assert!(expires > i32::MAX as u64);
    let documented = [
        ("x-queue-type", text("classic")),
        (
            "x-message-ttl",
            AMQPValue::LongInt(i32::try_from(MAX_DEFERRAL_MS).unwrap()),
        ),
        ("x-dead-letter-exchange", text("")),
        ("x-dead-letter-routing-key", text(&q)),
        ("x-expires", AMQPValue::LongLongInt(expires as i64)),
    ];
    let redeclared = broker.declare_raw(&hold, true, table(&documented)).await;
    assert!(redeclared.is_ok(), "{redeclared:?}");
    for other in [expires as i64 - 1, i64::from(i32::MAX)] {
        let mut args = documented.to_vec();
        args[4] = ("x-expires", AMQPValue::LongLongInt(other));
        assert!(
            is_precondition_failed(&broker.declare_raw(&hold, true, table(&args)).await),
            "x-expires {other} was accepted as equivalent"
        );
    }
    assert_eq!(broker.ready(&hold).await, 1);
}

/// A hold longer than `MAX_DEFERRAL_MS` is refused before anything is made:
/// no hold queue of any length appears, and nothing reaches the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_past_the_cap_creates_no_hold_queue() {
    let broker = broker!("a_hold_past_the_cap_creates_no_hold_queue");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .refuse_long_delays(true)
                .retry_granularity(Duration::from_millis(1))
                .deferred_granularity(Duration::from_millis(1)),
        )
        .await;
    let q = broker.queue("past-cap");
    // Tracked only so that a failure cleans up after itself.
    broker.hold(&q, MAX_DEFERRAL_MS);
    broker.hold(&q, MAX_DEFERRAL_MS + 1);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let too_long = Duration::from_millis(MAX_DEFERRAL_MS + 1);
    for result in [
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, 1), too_long),
        )
        .await,
        within("defer", backend.defer(&envelope(&q, 2), too_long)).await,
    ] {
        assert!(
            matches!(
                result,
                Err(Error::DelayTooLong { ref queue, delay_ms, max_ms })
                    if *queue == q
                        && delay_ms == u128::from(MAX_DEFERRAL_MS) + 1
                        && max_ms == MAX_DEFERRAL_MS
            ),
            "{result:?}"
        );
    }
    let holds = broker.queues_starting_with(&format!("{q}.deferred.")).await;
    assert!(holds.is_empty(), "{holds:?}");
    assert_eq!(broker.ready(&q).await, 0);
}

/// A transient queue, where the broker allows one; RabbitMQ 4.3 as
/// released refuses transient queues that are not exclusive (with a
/// connection error), and the refusal is a configuration error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_false_declares_a_transient_queue_without_priorities() {
    let broker = broker!("durable_false_declares_a_transient_queue_without_priorities");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("transient");
    let config = QueueConfig::new(&q).durable(false).max_priority(0);
    let declared = within("declare", backend.declare(std::slice::from_ref(&config))).await;
    if let Err(e) = declared {
        // RabbitMQ 4.3 as released refuses transient non-exclusive queues
        // (by closing the connection): a refusal of the configuration,
        // never retried, that says what to change.
        let version = broker.version().await;
        assert!(
            version >= (4, 3),
            "RabbitMQ {version:?} refused a transient queue: {e}"
        );
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        assert!(e.to_string().contains("declare it durable"), "{e}");
        assert!(!broker.exists(&q).await);
        return;
    }
    let classic = ("x-queue-type", text("classic"));
    // Equivalent: transient, the queue type only. Not equivalent: durable.
    assert!(
        broker
            .declare_raw(&q, false, table(std::slice::from_ref(&classic)))
            .await
            .is_ok()
    );
    assert!(
        broker
            .declare_raw(&q, true, table(std::slice::from_ref(&classic)))
            .await
            .is_err()
    );
}
