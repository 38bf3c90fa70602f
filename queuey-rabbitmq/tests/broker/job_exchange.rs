//! Jobs published through a job exchange of the application's instead of
//! the default exchange: the exchange is declared with the queues, work
//! queues are bound to it, jobs for later wait in the work queue stamped
//! with their due time until a worker holds them, and a job the exchange
//! cannot route says why.

use std::time::{Duration, Instant};

use futures::StreamExt;

use queuey_core::backend::Backend;
use queuey_core::{BackendErrorKind, QueueConfig};
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{envelope, kind, n_of, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_go_through_the_job_exchange_now_and_later_never_early() {
    let broker = broker!("jobs_go_through_the_job_exchange_now_and_later_never_early");
    let exchange = broker.exchange("jobs");
    let q = broker.queue("via-exchange");
    let options = RabbitMqOptions::default().job_exchange(&exchange);
    let producer = broker.backend_named("producer", options.clone()).await;
    let worker = broker.backend_named("worker", options).await;
    let config = QueueConfig::new(&q).max_priority(3);
    within("declare", worker.declare(std::slice::from_ref(&config)))
        .await
        .expect("declares the exchange and binds the queue");
    within("declare", producer.declare(std::slice::from_ref(&config)))
        .await
        .expect("declaring again changes nothing");

    let sent = Instant::now();
    within("publish", producer.publish(&envelope(&q, 1)))
        .await
        .expect("a job reaches its queue through the exchange");
    within(
        "publish_after",
        producer.publish_after(&envelope(&q, 2), Duration::from_secs(2)),
    )
    .await
    .expect("a job for later goes to its queue at once, stamped with its due time");
    within(
        "defer",
        producer.defer(&envelope(&q, 3), Duration::from_secs(1)),
    )
    .await
    .expect("a deferral likewise");
    assert_eq!(
        broker.ready(&q).await,
        3,
        "all three wait in the work queue"
    );

    // The consumer hands out the first at once and holds the others until
    // they are due: never early.
    let mut stream = within("consume", worker.consume(&config)).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let delivery = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("the job arrives")
            .expect("a delivery")
            .expect("not an error");
        let n = n_of(delivery.envelope());
        let due = match n {
            1 => Duration::ZERO,
            2 => Duration::from_secs(2),
            _ => Duration::from_secs(1),
        };
        assert!(
            sent.elapsed() >= due,
            "job {n} ran {:?} before its due time",
            due - sent.elapsed()
        );
        if n == 3 {
            assert_eq!(
                delivery.envelope().priority,
                3,
                "a deferral comes back first"
            );
        }
        seen.push(n);
        within("ack", delivery.ack()).await.unwrap();
    }
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 3]);
    drop(stream);

    // The bindings are the exchange's only way in: a queue of the same
    // vhost that was never bound is out of its reach.
    let unbound = broker.queue("unbound");
    let plain = broker
        .backend_named("plain", RabbitMqOptions::default())
        .await;
    within(
        "declare without the exchange",
        plain.declare(std::slice::from_ref(&QueueConfig::new(&unbound))),
    )
    .await
    .unwrap();
    let e = within(
        "publish to an unbound queue",
        producer.publish(&envelope(&unbound, 4)),
    )
    .await
    .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Unroutable);
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "no queue `{unbound}` is bound to the job exchange `{exchange}`"
        )),
        "{text}"
    );
    assert_eq!(broker.ready(&unbound).await, 0);

    // Declaring it with the exchange binds it: the same publish lands.
    within(
        "declare with the exchange",
        producer.declare(std::slice::from_ref(&QueueConfig::new(&unbound))),
    )
    .await
    .unwrap();
    within("publish again", producer.publish(&envelope(&unbound, 4)))
        .await
        .expect("bound now");
    broker.wait_ready(&unbound, 1).await;

    plain.close().await.ok();
    producer.close().await.ok();
    worker.close().await.ok();
}
