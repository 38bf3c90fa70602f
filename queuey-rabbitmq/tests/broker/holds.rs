//! Holds: release times, hold-queue expiry, and what priority a returning
//! job has.

use std::time::{Duration, Instant};

use futures::StreamExt;
use queuey_core::{Backend, QueueConfig};
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{envelope, n_of, within};

/// How late a hold may come back. RabbitMQ expires messages at the head of
/// the hold queue promptly; seconds of slack keep a loaded machine green.
const LATENESS: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_are_never_early_and_arrive_within_a_margin() {
    let broker = broker!("holds_are_never_early_and_arrive_within_a_margin");
    let backend = broker
        .backend(RabbitMqOptions::default().retry_granularity(Duration::from_millis(1)))
        .await;
    let q = broker.queue("timing");
    broker.hold(&q, 200);
    broker.hold(&q, 1_000);
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();

    let started = Instant::now();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1_000), Duration::from_millis(1_000)),
    )
    .await
    .unwrap();
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 200), Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let mut arrivals = Vec::new();
    for _ in 0..2 {
        let delivery = within("held job", stream.next()).await.unwrap().unwrap();
        arrivals.push((n_of(delivery.envelope()), started.elapsed()));
        within("ack", delivery.ack()).await.unwrap();
    }
    assert_eq!(
        arrivals.iter().map(|a| a.0).collect::<Vec<_>>(),
        [200, 1_000],
        "{arrivals:?}"
    );
    for (delay_ms, elapsed) in arrivals {
        let delay = Duration::from_millis(u64::from(delay_ms));
        assert!(
            elapsed >= delay,
            "released early: {delay:?} hold after {elapsed:?}"
        );
        assert!(
            elapsed <= delay + LATENESS,
            "{delay:?} hold took {elapsed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_hold_queue_deletes_itself() {
    let broker = broker!("an_idle_hold_queue_deletes_itself");
    let backend = broker
        .backend(RabbitMqOptions::default().retry_granularity(Duration::from_millis(100)))
        .await;
    let q = broker.queue("expiry");
    let hold = broker.hold(&q, 300);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    let declared_at = Instant::now();
    // 250 ms rounds up to the 300 ms hold queue, which expires after 600 ms idle.
    within(
        "publish_after",
        backend.publish_after(&envelope(&q, 1), Duration::from_millis(250)),
    )
    .await
    .unwrap();

    // Watch it through rabbitmqctl: a passive declare would renew its lease.
    let mut seen = false;
    let gone = within("hold queue expiry", async {
        loop {
            let names = broker
                .rabbitmqctl(&["list_queues", "name", "-q", "--no-table-headers"])
                .await;
            if names.lines().any(|l| l == hold) {
                seen = true;
            } else {
                return declared_at.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        gone >= Duration::from_millis(600),
        "hold queue gone after only {gone:?}"
    );
    assert!(
        seen || gone < Duration::from_secs(2),
        "the hold queue was never listed"
    );
    // Its message was released onto q before it went.
    broker.wait_ready(&q, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferral_overtakes_the_backlog() {
    const BACKLOG: u32 = 200;
    let broker = broker!("a_deferral_overtakes_the_backlog");
    let backend = broker
        .backend(RabbitMqOptions::default().deferred_granularity(Duration::from_millis(100)))
        .await;
    let q = broker.queue("overtake");
    broker.hold(&q, 300);
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let backlog: Vec<_> = (0..BACKLOG).map(|n| envelope(&q, n)).collect();
    for result in within("backlog", backend.publish_batch(&backlog)).await {
        result.unwrap();
    }

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let first = within("first", stream.next()).await.unwrap().unwrap();
    let deferred_n = n_of(first.envelope());
    let next = first.envelope().deferred(config.top_priority());
    within("defer", first.defer(next, Duration::from_millis(300)))
        .await
        .unwrap();
    // With prefetch 1 the consumer now holds the next backlog message.
    let second = within("second", stream.next()).await.unwrap().unwrap();
    assert_ne!(n_of(second.envelope()), deferred_n);
    // Wait until the deferral is back on q behind the remaining backlog.
    broker.wait_ready(&q, BACKLOG - 2 + 1).await;
    within("ack", second.ack()).await.unwrap();

    let back = within("deferral", stream.next()).await.unwrap().unwrap();
    let env = back.envelope();
    assert_eq!(n_of(env), deferred_n, "the deferral did not come first");
    assert_eq!((env.attempt, env.deferrals, env.priority), (1, 1, 10));
    within("ack", back.ack()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_joins_the_back_of_the_queue() {
    const BACKLOG: u32 = 50;
    let broker = broker!("a_retry_joins_the_back_of_the_queue");
    let backend = broker
        .backend(RabbitMqOptions::default().retry_granularity(Duration::from_millis(100)))
        .await;
    let q = broker.queue("fifo");
    broker.hold(&q, 200);
    let config = QueueConfig::new(&q).prefetch(1);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    // One at a time, so the queue holds them in order.
    for n in 0..BACKLOG {
        within("backlog", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    // A high-priority job, served first; its retry must not keep that priority.
    within(
        "publish",
        backend.publish(&envelope(&q, 999).with_priority(5)),
    )
    .await
    .unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let first = within("first", stream.next()).await.unwrap().unwrap();
    assert_eq!(n_of(first.envelope()), 999);
    let next = first.envelope().next_attempt();
    within("retry", first.retry(next, Duration::from_millis(200)))
        .await
        .unwrap();
    broker.wait_ready(&q, BACKLOG).await; // 49 still ready + the returned retry

    let mut order = Vec::new();
    for _ in 0..=BACKLOG {
        let d = within("delivery", stream.next()).await.unwrap().unwrap();
        order.push((
            n_of(d.envelope()),
            d.envelope().attempt,
            d.envelope().priority,
        ));
        within("ack", d.ack()).await.unwrap();
    }
    assert_eq!(order.last(), Some(&(999, 2, 0)), "{order:?}");
    let rest: Vec<u32> = order[..BACKLOG as usize].iter().map(|o| o.0).collect();
    assert_eq!(rest, (0..BACKLOG).collect::<Vec<_>>());
}
