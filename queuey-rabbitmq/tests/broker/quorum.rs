//! Quorum work queues: their arguments, what is refused before anything is
//! created, FIFO deferrals, and the broker's delivery limit as a backstop.

use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::BasicNackOptions;
use queuey_core::backend::Backend;
use queuey_core::{BackendErrorKind, Disposition, Error, QueueConfig, QueueType};
use queuey_rabbitmq::{HoldQueues, RabbitMqOptions};

use crate::support::{envelope, header, kind, n_of, table, text, warnings_mentioning, within};

fn quorum(name: &str) -> QueueConfig {
    QueueConfig::new(name).queue_type(QueueType::Quorum)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_and_its_dead_letter_queue_have_the_documented_arguments() {
    let broker = broker!("a_quorum_queue_and_its_dead_letter_queue_have_the_documented_arguments");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("quorum-args");
    let config = quorum(&q).message_ttl(Duration::from_secs(3_600));
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    // Declaring again is a no-op.
    within(
        "declare again",
        backend.declare(std::slice::from_ref(&config)),
    )
    .await
    .unwrap();
    assert_eq!(
        broker.listed(&q).await.as_deref(),
        Some(
            format!(
                "quorum\ttrue\t[{{\"x-dead-letter-exchange\",[]}},\
                 {{\"x-dead-letter-routing-key\",\"{q}.dead\"}},\
                 {{\"x-dead-letter-strategy\",\"at-least-once\"}},{{\"x-delivery-limit\",20}},\
                 {{\"x-message-ttl\",3600000}},{{\"x-overflow\",\"reject-publish\"}},\
                 {{\"x-queue-type\",\"quorum\"}}]"
            )
            .as_str()
        )
    );
    assert_eq!(
        broker.listed(&format!("{q}.dead")).await.as_deref(),
        Some("quorum\ttrue\t[{\"x-delivery-limit\",1000000},{\"x-queue-type\",\"quorum\"}]")
    );
}

/// A quorum dead-letter queue created by an earlier version, without a
/// delivery limit, cannot take one in place: the queues are declared all
/// the same (the dead-letter queue as it was), and the worker starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_created_without_a_delivery_limit_is_still_declared() {
    let broker = broker!("a_dead_letter_queue_created_without_a_delivery_limit_is_still_declared");
    let q = broker.queue("older-dead");
    let dead = format!("{q}.dead");
    broker
        .declare_raw(&dead, true, table(&[("x-queue-type", text("quorum"))]))
        .await
        .expect("an older dead-letter queue");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let config = quorum(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .expect("declared all the same");
    // And again (the publish path declares it again when it is gone).
    within(
        "declare again",
        backend.declare(std::slice::from_ref(&config)),
    )
    .await
    .expect("declared all the same");
    assert_eq!(
        broker.listed(&dead).await.as_deref(),
        Some("quorum\ttrue\t[{\"x-queue-type\",\"quorum\"}]")
    );
    assert!(
        warnings_mentioning(&dead)
            .iter()
            .any(|w| w.contains("without a delivery limit")),
        "a warning says what it risks"
    );
    backend.close().await.ok();
}

/// Every combination a quorum queue cannot have is refused by `declare`
/// before anything exists on the broker, with what to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_quorum_queues_are_refused_before_anything_is_created() {
    let broker = broker!("impossible_quorum_queues_are_refused_before_anything_is_created");
    let quorum_holds = broker.backend(RabbitMqOptions::default()).await;
    let classic_holds = broker
        .backend(RabbitMqOptions::default().hold_queues(HoldQueues::Classic))
        .await;
    let q = broker.queue("impossible");
    let cases: [(&queuey_rabbitmq::RabbitMqBackend, QueueConfig, &str); 3] = [
        (
            &quorum_holds,
            quorum(&q).max_priority(5),
            "no priority levels",
        ),
        (&quorum_holds, quorum(&q).durable(false), "always durable"),
        (&classic_holds, quorum(&q), "HoldQueues::Quorum"),
    ];
    for (backend, config, says) in cases {
        let e = within("declare", backend.declare(std::slice::from_ref(&config)))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidConfig(m) if m.contains(says) && m.contains(&q)),
            "{e}"
        );
        assert!(!broker.exists(&q).await);
        assert!(!broker.exists(&format!("{q}.dead")).await);
    }
}

/// RabbitMQ cannot change a queue's type in place: declaring an existing
/// classic queue as a quorum queue is refused, and the error points to the
/// changelog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_queue_cannot_become_a_quorum_queue_in_place() {
    let broker = broker!("a_classic_queue_cannot_become_a_quorum_queue_in_place");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("migrate");
    within("declare classic", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let e = within("declare quorum", backend.declare(&[quorum(&q)]))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
    let text = e.to_string();
    assert!(text.contains("PRECONDITION_FAILED"), "{text}");
    assert!(text.contains("CHANGELOG.md says how"), "{text}");
    assert_eq!(
        broker.listed(&q).await.as_deref().map(|l| &l[..8]),
        Some("classic\t")
    );
}

/// A quorum queue has no priority levels: a deferral goes into a quorum
/// hold and comes back behind the backlog, in FIFO order, no earlier than
/// asked; a retry goes the same way. Both come back intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_quorum_queue_deferrals_and_retries_come_back_in_fifo_order() {
    const BACKLOG: u32 = 20;
    let broker = broker!("on_a_quorum_queue_deferrals_and_retries_come_back_in_fifo_order");
    let backend = broker
        .backend(
            RabbitMqOptions::default()
                .deferred_granularity(Duration::from_millis(100))
                .retry_granularity(Duration::from_millis(100)),
        )
        .await;
    let q = broker.queue("quorum-fifo");
    let config = quorum(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    within("job 0", backend.publish(&envelope(&q, 0).with_priority(7)))
        .await
        .unwrap();
    within("job 1", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let started = Instant::now();
    for (n, disposition) in [
        (
            0,
            Disposition::Defer {
                delay: Duration::from_millis(300),
            },
        ),
        (
            1,
            Disposition::Retry {
                delay: Duration::from_millis(300),
            },
        ),
    ] {
        let delivery = within("first", stream.next()).await.unwrap().unwrap();
        assert_eq!(n_of(delivery.envelope()), n);
        within("settle", delivery.settle(disposition))
            .await
            .unwrap();
    }
    // The backlog arrives while both wait in the hold, one job at a time
    // so that the queue holds it in order.
    for n in 2..2 + BACKLOG {
        within("backlog", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    let mut order = Vec::new();
    for _ in 0..BACKLOG + 2 {
        let delivery = within("next", stream.next()).await.unwrap().unwrap();
        let env = delivery.envelope();
        if env.deferrals > 0 || env.attempt > 1 {
            assert!(
                started.elapsed() >= Duration::from_millis(300),
                "early: {:?}",
                started.elapsed()
            );
            // No priority property on a quorum queue.
            assert_eq!(env.priority, 0, "{env:?}");
        }
        order.push(n_of(env));
        within("ack", delivery.ack()).await.unwrap();
    }
    let held: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, n)| **n < 2)
        .map(|(i, _)| i)
        .collect();
    // Both came back after at least part of the backlog, in hold order.
    assert_eq!(held.len(), 2, "{order:?}");
    assert!(held[0] > 0, "the deferral jumped the backlog: {order:?}");
    assert_eq!(
        order
            .iter()
            .filter(|n| **n >= 2)
            .copied()
            .collect::<Vec<_>>(),
        (2..2 + BACKLOG).collect::<Vec<_>>(),
        "{order:?}"
    );
}

/// The broker's own delivery limit: past 20 returns the broker moves a
/// message to `q.dead` (at least once) instead of dropping it, as RabbitMQ
/// 4 would by default. What counts as a return differs: up to RabbitMQ
/// 4.2 a `basic.nack` with requeue does; RabbitMQ 4.3 counts only a
/// delivery returned by closing its channel (or connection), which is what
/// a worker that dies does. On 4.3 the test checks that 25 nacks are not
/// counted, then returns the message by closing channels. (queuey's own
/// backstop, the poison guard, counts for itself on every version.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_delivery_limit_a_message_goes_to_the_dead_letter_queue() {
    let broker = broker!("past_the_delivery_limit_a_message_goes_to_the_dead_letter_queue");
    let nacks_count = broker.version().await < (4, 3);
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("delivery-limit");
    let dead = format!("{q}.dead");
    within("declare", backend.declare(&[quorum(&q)]))
        .await
        .unwrap();
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();

    // A consumer that hands every delivery back by nacking it.
    let (channel, mut consumer) = broker.consume_raw(&q, 1, "queuey-test-nacker").await;
    let deliveries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&deliveries);
    let nacks = if nacks_count { usize::MAX } else { 25 };
    let nacker = tokio::spawn(async move {
        while let Some(Ok(delivery)) = consumer.next().await {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if n > nacks {
                // Held, not nacked: the test closes the channel.
                std::mem::forget(delivery);
                break;
            }
            let requeue = BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            };
            if delivery.nack(requeue).await.is_err() {
                break;
            }
        }
    });
    if nacks_count {
        broker.wait_ready(&dead, 1).await;
        nacker.abort();
        let deliveries = deliveries.load(std::sync::atomic::Ordering::SeqCst);
        // 20 allowed deliveries, the one past the limit is dead-lettered.
        assert!((20..=22).contains(&deliveries), "{deliveries}");
    } else {
        within("25 nacks and one more delivery", nacker)
            .await
            .unwrap();
        assert_eq!(broker.ready(&dead).await, 0, "nacks were not counted");
        channel.close(200, "returned".into()).await.unwrap();
        // Each channel closed with the delivery unsettled is one return.
        let mut closes = 1;
        while broker.ready(&dead).await == 0 {
            assert!(
                closes <= 22,
                "still not dead-lettered after {closes} returns"
            );
            let (channel, mut consumer) = broker.consume_raw(&q, 1, "queuey-test-closer").await;
            let delivered = tokio::time::timeout(Duration::from_secs(2), consumer.next()).await;
            let _ = channel.close(200, "returned".into()).await;
            if let Ok(Some(Ok(_))) = delivered {
                closes += 1;
            }
        }
        assert!((20..=22).contains(&closes), "{closes}");
    }
    let msg = broker.get(&dead).await.expect("the dead letter");
    assert_eq!(
        n_of(&queuey_core::Envelope::decode(&msg.delivery.data).unwrap()),
        1
    );
    assert_eq!(
        header(&msg, "x-first-death-reason").as_deref(),
        Some("delivery_limit")
    );
}
