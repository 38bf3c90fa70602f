//! Consuming: malformed bodies, prefetch, consumer tags, connection names,
//! and broker-side cancellation.

use queuey_core::Disposition;
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};
use queuey_core::backend::Backend;
use queuey_core::{BackendErrorKind, QueueConfig};
use queuey_rabbitmq::RabbitMqOptions;
use queuey_rabbitmq::options::REQUEUE_DELAY;

use crate::support::{envelope, header, kind, n_of, warnings_mentioning, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_body_goes_verbatim_to_the_dead_letter_queue() {
    let broker = broker!("a_malformed_body_goes_verbatim_to_the_dead_letter_queue");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("malformed");
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();

    let garbage = b"not json {\xff".to_vec();
    let mut forged = FieldTable::default();
    forged.insert("x-death".into(), AMQPValue::LongString("forged".into()));
    let props = BasicProperties::default()
        .with_message_id("garbage-1".into())
        .with_headers(forged);
    broker.publish_raw(&q, &garbage, props).await;
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let first = within("first item", stream.next()).await.unwrap().unwrap();
    assert_eq!(
        n_of(first.envelope()),
        1,
        "the stream yielded something else first"
    );
    within("ack", first.ack()).await.unwrap();

    let dead = format!("{q}.dead");
    broker.wait_ready(&dead, 1).await;
    let copy = broker.get(&dead).await.unwrap();
    assert_eq!(copy.delivery.data, garbage);
    assert_eq!(
        header(&copy, "x-death-reason").as_deref(),
        Some("malformed envelope")
    );
    assert_eq!(
        header(&copy, "x-original-queue").as_deref(),
        Some(q.as_str())
    );
    assert_eq!(header(&copy, "x-attempts").as_deref(), Some("i64:0"));
    assert_eq!(
        header(&copy, "x-death"),
        None,
        "a forged x-death was copied"
    );
    assert_eq!(
        copy.delivery
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str()),
        Some("garbage-1")
    );
    // Acked: nothing is left on q, nothing unacknowledged.
    drop(stream);
    broker.wait_ready(&q, 0).await;
    let nothing = tokio::time::timeout(Duration::from_millis(300), async {
        let mut again = backend.consume(&config).await.unwrap();
        again.next().await.map(|d| d.map(|d| n_of(d.envelope())))
    })
    .await;
    assert!(nothing.is_err(), "something was redelivered: {nothing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_bounds_unacknowledged_deliveries() {
    let broker = broker!("prefetch_bounds_unacknowledged_deliveries");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("prefetch");
    let config = QueueConfig::new(&q).prefetch(3);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    for n in 0..10 {
        within("publish", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(within("delivery", stream.next()).await.unwrap().unwrap());
    }
    let fourth = tokio::time::timeout(Duration::from_millis(500), stream.next()).await;
    assert!(
        fourth.is_err(),
        "a fourth delivery arrived while three were unacked"
    );
    let listing = broker
        .rabbitmqctl(&[
            "list_queues",
            "name",
            "messages_ready",
            "messages_unacknowledged",
            "-q",
            "--no-table-headers",
        ])
        .await;
    assert!(
        listing.lines().any(|l| l == format!("{q}\t7\t3")),
        "{listing}"
    );
    within("ack", held.pop().unwrap().ack()).await.unwrap();
    let next = within("after an ack", stream.next())
        .await
        .unwrap()
        .unwrap();
    within("ack", next.ack()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_tags_and_the_connection_name_show_on_the_broker() {
    let broker = broker!("consumer_tags_and_the_connection_name_show_on_the_broker");
    let backend = broker
        .backend(RabbitMqOptions::default().client_property("team", "billing"))
        .await;
    // 200 bytes: the tag keeps only the first 160.
    let q = format!(
        "queuey-test.tag.{}.{}",
        uuid::Uuid::new_v4().simple(),
        "t".repeat(200 - 49)
    );
    assert_eq!(q.len(), 200);
    broker.track(&q);
    broker.track(&format!("{q}.dead"));
    let config = QueueConfig::new(&q).max_priority(0);
    // 200 + ".deferred.2147483647" is over 255, so declare refuses it; the
    // consumer only needs the queue to exist.
    broker
        .declare_raw(&q, true, crate::support::table(&[]))
        .await
        .unwrap();
    let _stream = within("consume", backend.consume(&config)).await.unwrap();

    let consumers = broker
        .rabbitmqctl(&[
            "list_consumers",
            "queue_name",
            "consumer_tag",
            "-q",
            "--no-table-headers",
        ])
        .await;
    let tag = consumers
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{q}\t")))
        .unwrap_or_else(|| panic!("no consumer on {q}:\n{consumers}"));
    let rest = tag
        .strip_prefix(&format!("queuey.{}.", &q[..160]))
        .expect("queuey.{queue}.");
    let (nanos, sequence) = rest.split_once('.').expect("{nanos:x}.{sequence}");
    assert!(u128::from_str_radix(nanos, 16).is_ok(), "{tag}");
    assert!(sequence.parse::<u64>().is_ok(), "{tag}");

    let connections = broker
        .rabbitmqctl(&[
            "list_connections",
            "client_properties",
            "-q",
            "--no-table-headers",
        ])
        .await;
    let ours = connections
        .lines()
        .find(|l| l.contains(&broker.connection_name("backend")))
        .unwrap_or_else(|| panic!("connection name not listed:\n{connections}"));
    assert!(ours.contains("billing"), "{ours}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_is_declared_again_and_consumed() {
    let broker = broker!("a_deleted_queue_is_declared_again_and_consumed");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("cancel");
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let ch = broker.channel().await;
    ch.queue_delete(
        q.as_str().into(),
        lapin::options::QueueDeleteOptions::default(),
    )
    .await
    .unwrap();
    // The broker cancels the consumer; the stream, polled, declares the
    // queue again and consumes it, so a job published now is delivered.
    let next = tokio::spawn(async move { stream.next().await });
    let mut published = false;
    for _ in 0..50 {
        if broker.exists(&q).await {
            within("publish", backend.publish(&envelope(&q, 1)))
                .await
                .unwrap();
            published = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(published, "the queue was declared again");
    let delivery = within("delivery", next).await.unwrap().unwrap().unwrap();
    within("ack", delivery.ack()).await.unwrap();
    assert!(backend.is_connected());
}

/// With `declare_dead_letter_queues(false)` a body that is not an envelope
/// is rejected without requeue: it leaves `q`, no `q.dead` appears, it never
/// reaches the stream, and the rejection is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_dead_letter_queues_a_malformed_body_is_rejected_and_logged() {
    let broker = broker!("without_dead_letter_queues_a_malformed_body_is_rejected_and_logged");
    let backend = broker
        .backend(RabbitMqOptions::default().declare_dead_letter_queues(false))
        .await;
    let q = broker.queue("malformed-no-dlq");
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let props = BasicProperties::default().with_message_id("garbage-2".into());
    broker.publish_raw(&q, b"\x00 not an envelope", props).await;
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    // With prefetch 1 the job behind it is delivered only once the garbage
    // was settled; a requeue would put the garbage back in front of it.
    let first = within("first item", stream.next()).await.unwrap().unwrap();
    assert_eq!(n_of(first.envelope()), 1);
    within("ack", first.ack()).await.unwrap();
    let nothing = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(nothing.is_err(), "the stream yielded more: {nothing:?}");

    within("q to empty", async {
        while broker.ready_and_unacked(&q).await != Some((0, 0)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(!broker.exists(&format!("{q}.dead")).await);
    let warnings = warnings_mentioning(&q);
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("WARN")
                && w.contains("rejected a malformed message without requeue")),
        "{warnings:?}"
    );
}

/// A settle that fails leaves the delivery unacknowledged, and the backend
/// hands it back after `REQUEUE_DELAY`: with prefetch 1, two retries failing
/// in a row (the hold queue belongs to someone else) each get the job back
/// on the same stream, and a job published meanwhile still arrives once the
/// failing one is acknowledged. (The poison guard is off: with it, a job
/// handed back goes to the back of the work queue or to the suspect queue,
/// and the other job may come first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_settles_do_not_stall_the_consumer() {
    const LATE: Duration = Duration::from_secs(5);
    let broker = broker!("failed_settles_do_not_stall_the_consumer");
    let backend = broker
        .backend(RabbitMqOptions::default().poison_guard(None))
        .await;
    let q = broker.queue("stall");
    let foreign = broker.hold(&q, 1_000);
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let args = [("x-message-ttl", AMQPValue::LongInt(5_000))];
    broker
        .declare_raw(&foreign, true, crate::support::table(&args))
        .await
        .unwrap();
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let mut delivery = within("delivery", stream.next()).await.unwrap().unwrap();
    assert!(!delivery.redelivered());
    for failure in 1..=2 {
        let tried = Instant::now();
        let e = within(
            "retry",
            delivery.settle(Disposition::Retry {
                delay: Duration::from_secs(1),
            }),
        )
        .await
        .unwrap_err();
        assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
        if failure == 1 {
            within("publish", backend.publish(&envelope(&q, 2)))
                .await
                .unwrap();
        }
        delivery = within("redelivery", stream.next()).await.unwrap().unwrap();
        let after = tried.elapsed();
        assert_eq!(n_of(delivery.envelope()), 1, "after failure {failure}");
        assert!(delivery.redelivered());
        assert!(
            after >= REQUEUE_DELAY,
            "handed back after only {after:?} (failure {failure})"
        );
        assert!(
            after <= REQUEUE_DELAY + LATE,
            "handed back after {after:?} (failure {failure})"
        );
    }
    within("ack", delivery.ack()).await.unwrap();
    let other = within("the other job", stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n_of(other.envelope()), 2);
    within("ack", other.ack()).await.unwrap();
    assert_eq!(broker.ready(&foreign).await, 0);
}

/// Earlier versions sent content type, type and timestamp as well; such a
/// message is consumed like any other (its properties are not read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_with_the_earlier_properties_are_consumed() {
    let broker = broker!("messages_with_the_earlier_properties_are_consumed");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("earlier");
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let job = envelope(&q, 7).with_priority(2);
    let earlier = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
        .with_message_id(job.job_id.to_string().into())
        .with_type("test_job".into())
        .with_priority(2)
        .with_timestamp(job.enqueued_at_ms / 1000);
    broker
        .publish_raw(&q, &job.encode().unwrap(), earlier)
        .await;
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let delivery = within("delivery", stream.next()).await.unwrap().unwrap();
    assert_eq!(delivery.envelope(), &job);
    within("ack", delivery.ack()).await.unwrap();
    broker.wait_ready(&q, 0).await;
}

/// Acknowledgements are coalesced into multiple ones, which settle every
/// delivery up to their tag: they must never reach a delivery still at
/// work, nor one handed back. Twenty deliveries taken at once; the first
/// and the tenth kept at work, the fifth requeued, the rest acknowledged
/// together. Exactly the three come back, and the channel survives (a
/// requeue of a delivery a multiple acknowledgement had covered would
/// close it with `PRECONDITION_FAILED`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_acknowledgements_never_cover_a_delivery_at_work() {
    let broker = broker!("coalesced_acknowledgements_never_cover_a_delivery_at_work");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("coalesced");
    let config = QueueConfig::new(&q).prefetch(20);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    for n in 1..=20 {
        within("publish", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let mut deliveries = Vec::new();
    while deliveries.len() < 20 {
        let delivery = within("a delivery", stream.next()).await.unwrap().unwrap();
        deliveries.push(delivery);
    }
    let order: Vec<u32> = deliveries.iter().map(|d| n_of(d.envelope())).collect();
    assert_eq!(order, (1..=20).collect::<Vec<_>>());

    let mut at_work = Vec::new();
    let mut settles = Vec::new();
    for delivery in deliveries {
        match n_of(delivery.envelope()) {
            1 | 10 => at_work.push(delivery),
            5 => settles.push(delivery.settle(Disposition::Requeue)),
            _ => settles.push(delivery.ack()),
        }
    }
    for settled in within("settles", futures::future::join_all(settles)).await {
        settled.unwrap();
    }
    // The requeued job comes back on the same channel, which is alive.
    let again = within("the requeued job", stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n_of(again.envelope()), 5);
    within("ack", again.ack()).await.unwrap();
    // The broker's listing lags a little: poll it until only the two at
    // work are left unacknowledged.
    within("only the two at work unacknowledged", async {
        while broker.ready_and_unacked(&q).await != Some((0, 2)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // Let them go: the broker has them back.
    drop(at_work);
    drop(stream);
    within("close", backend.close()).await.unwrap();
    broker.wait_ready(&q, 2).await;
    let mut back = Vec::new();
    while let Some(message) = broker.get(&q).await {
        back.push(n_of(
            &queuey_core::Envelope::decode(&message.delivery.data).unwrap(),
        ));
    }
    back.sort_unstable();
    assert_eq!(back, [1, 10]);
}

/// Coalesced acknowledgements under load, one in ten jobs handed back once:
/// 3 000 jobs at a prefetch of 50, each finishing after a pause of its own
/// (so out of order), then 10 000 at a prefetch of 10 finishing at once
/// (so that a lone open delivery is often acknowledged without the writer,
/// while the writer sends runs). A multiple acknowledgement that overtook a
/// plain one, or covered a delivery being handed back, would close the
/// channel and bring its unacknowledged deliveries back marked redelivered:
/// only the jobs handed back may come back, each once and as a new message,
/// and the queue ends empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_acknowledgements_hold_under_load() {
    let broker = broker!("coalesced_acknowledgements_hold_under_load");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    load(&broker, &backend, 3_000, 50, true).await;
    load(&broker, &backend, 10_000, 10, false).await;
    within("close", backend.close()).await.unwrap();
}

async fn load(
    broker: &crate::support::Broker,
    backend: &queuey_rabbitmq::RabbitMqBackend,
    jobs: u32,
    prefetch: u16,
    pauses: bool,
) {
    let q = broker.queue("coalesced-load");
    let config = QueueConfig::new(&q).prefetch(prefetch);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let publishes = (0..jobs).map(|n| {
        let envelope = envelope(&q, n);
        async move { backend.publish(&envelope).await }
    });
    for published in within("publish", futures::future::join_all(publishes)).await {
        published.unwrap();
    }
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let mut settles = tokio::task::JoinSet::new();
    let (mut first, mut again) = (0u32, 0u32);
    let mut seen = vec![0u8; jobs as usize];
    within("every job settled", async {
        while first + again < jobs + jobs / 10 {
            let delivery = stream.next().await.unwrap().unwrap();
            let n = n_of(delivery.envelope());
            seen[n as usize] += 1;
            let hand_back = n.is_multiple_of(10) && seen[n as usize] == 1;
            // A job handed back comes back as a new message; anything
            // redelivered came back from a closed channel.
            assert!(!delivery.redelivered(), "job {n} came back redelivered");
            if seen[n as usize] > 1 {
                again += 1;
                assert!(
                    n.is_multiple_of(10),
                    "job {n} came back without being handed back"
                );
                assert_eq!(seen[n as usize], 2, "job {n} came back twice");
            } else {
                first += 1;
            }
            settles.spawn(async move {
                if pauses {
                    // Pauses of 0 to 3 ms, so jobs finish out of order.
                    tokio::time::sleep(Duration::from_micros(u64::from(n * 7919 % 3_000))).await;
                }
                let disposition = if hand_back {
                    Disposition::Requeue
                } else {
                    Disposition::Ack
                };
                delivery.settle(disposition).await
            });
            while let Some(settled) = settles.try_join_next() {
                settled.unwrap().unwrap();
            }
        }
        while let Some(settled) = settles.join_next().await {
            settled.unwrap().unwrap();
        }
    })
    .await;
    assert_eq!((first, again), (jobs, jobs / 10));
    within("nothing left", async {
        while broker.ready_and_unacked(&q).await != Some((0, 0)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}
