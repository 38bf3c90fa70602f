//! Broker calls across a lost connection, through the fault proxy: a
//! publish waits for the reconnection up to its bound and never reports a
//! success it cannot know; `close()` returns within its bound.

use std::time::{Duration, Instant};

use queuey::backend::Backend;

use queuey::backend::BackendErrorKind;
use queuey::queue::QueueConfig;

use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
// The facade does not re-export it (yet).
use queuey_core::backend::ConnectionState;

use crate::fault::proxy::Proxy;
use crate::support::{Broker, envelope, kind, within};

/// A backend connected through a fresh proxy, with a declared queue.
async fn through_proxy(
    broker: &Broker,
    label: &str,
    options: RabbitMqOptions,
) -> (Proxy, RabbitMqBackend, String) {
    let (proxy, url) = Proxy::in_front_of(&broker.url).await;
    let options = options
        .connection_name(broker.connection_name(label))
        .connect_timeout(Duration::from_secs(2))
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(500));
    let options = broker.isolate(options);
    let backend = within("connect", RabbitMqBackend::with_options(&url, options))
        .await
        .expect("connects through the proxy");
    let q = broker.queue(label);
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .expect("declared");
    (proxy, backend, q)
}

/// Waits until the backend reports `state`.
async fn wait_state(backend: &RabbitMqBackend, state: ConnectionState) {
    within(&format!("the backend to be {state:?}"), async {
        while backend.connection_state() != state {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Cuts every connection and refuses new ones: the broker is unreachable.
async fn take_down(proxy: &Proxy, backend: &RabbitMqBackend) {
    proxy.refuse(true);
    proxy.cut();
    wait_state(backend, ConnectionState::Reconnecting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_while_disconnected_waits_for_the_reconnection_then_succeeds() {
    let broker = broker!("a_publish_while_disconnected_waits_for_the_reconnection_then_succeeds");
    let (proxy, backend, q) = through_proxy(&broker, "wait", RabbitMqOptions::default()).await;
    take_down(&proxy, &backend).await;

    let started = Instant::now();
    let publishing = tokio::spawn({
        let backend = backend.clone();
        let envelope = envelope(&q, 1);
        async move { backend.publish(&envelope).await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !publishing.is_finished(),
        "the publish returned while the broker was unreachable: {:?}",
        publishing.await
    );
    proxy.refuse(false);
    within("the publish", publishing)
        .await
        .expect("the publish task")
        .expect("the publish succeeds once the backend is back");
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(backend.connection_state(), ConnectionState::Connected);
    broker.wait_ready(&q, 1).await;
    within("close", backend.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_past_its_bound_fails_with_timed_out_and_is_not_stored() {
    let broker = broker!("a_publish_past_its_bound_fails_with_timed_out_and_is_not_stored");
    let options = RabbitMqOptions::default().publish_timeout(Duration::from_secs(2));
    let (proxy, backend, q) = through_proxy(&broker, "bound", options).await;
    take_down(&proxy, &backend).await;

    let started = Instant::now();
    let e = within("the publish", backend.publish(&envelope(&q, 1)))
        .await
        .expect_err("a publish while the broker is unreachable cannot succeed");
    let took = started.elapsed();
    assert_eq!(kind(&e), BackendErrorKind::TimedOut, "{e}");
    assert!(e.is_transient(), "{e}");
    assert!(e.to_string().contains("unreachable"), "{e}");
    // Never early; late by at most a few seconds.
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");

    // Once the broker is back the backend works again, and the publish
    // that timed out was never sent.
    proxy.refuse(false);
    wait_state(&backend, ConnectionState::Connected).await;
    within("publish", backend.publish(&envelope(&q, 2)))
        .await
        .expect("publishing works again");
    broker.wait_ready(&q, 1).await;
    let only = broker.get(&q).await.expect("one message");
    assert_eq!(
        crate::support::n_of(&queuey::job::Envelope::decode(&only.delivery.data).unwrap()),
        2
    );
    within("close", backend.close()).await.unwrap();
}

/// Publishes whose confirms are on their way when the connection is cut;
/// returns their error kinds (panicking on any success) and how many of
/// them the broker nonetheless holds.
async fn cut_before_the_confirms(test: &str) -> Option<(Vec<BackendErrorKind>, u32)> {
    let broker = Broker::new(test).await?;
    let options = RabbitMqOptions::default().publish_timeout(Duration::from_secs(3));
    let (proxy, backend, q) = through_proxy(&broker, "uncertain", options).await;
    // Open every publishing channel first, so that the publishes below
    // go out at once.
    let warm_up: Vec<_> = (0..16)
        .map(|n| {
            let backend = backend.clone();
            let envelope = envelope(&q, 100 + n);
            tokio::spawn(async move { backend.publish(&envelope).await })
        })
        .collect();
    for publish in warm_up {
        within("warm-up", publish)
            .await
            .unwrap()
            .expect("warm-up publish");
    }
    let before = broker.ready(&q).await;
    // The publishes reach the broker; their confirmations never come back.
    proxy.mute_replies(true);
    let publishes: Vec<_> = (0..16)
        .map(|n| {
            let backend = backend.clone();
            let envelope = envelope(&q, n);
            tokio::spawn(async move { backend.publish(&envelope).await })
        })
        .collect();
    within("the publishes to reach the broker", async {
        while broker.ready(&q).await == before {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.refuse(true);
    proxy.cut();
    let mut kinds = Vec::new();
    for publish in publishes {
        match within("a publish", publish).await.expect("publish task") {
            Ok(()) => panic!("a publish whose confirm was lost was reported as a success"),
            Err(e) => kinds.push(kind(&e)),
        }
    }
    // Only now: a connection not yet torn down by the cut must not pass
    // the held confirmations on.
    proxy.mute_replies(false);
    proxy.refuse(false);
    wait_state(&backend, ConnectionState::Connected).await;
    let stored = broker.ready(&q).await - before;
    eprintln!("error kinds {kinds:?}; the broker holds {stored} of the 16");
    within("close", backend.close()).await.unwrap();
    Some((kinds, stored))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_lost_with_the_connection_is_never_reported_as_success() {
    let Some((kinds, _)) =
        cut_before_the_confirms("a_confirm_lost_with_the_connection_is_never_reported_as_success")
            .await
    else {
        return;
    };
    for k in &kinds {
        assert!(k.is_transient(), "{kinds:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_lost_with_the_connection_is_reported_uncertain() {
    let Some((kinds, stored)) =
        cut_before_the_confirms("a_confirm_lost_with_the_connection_is_reported_uncertain").await
    else {
        return;
    };
    // Those that reached the broker unconfirmed are exactly what Uncertain
    // says (and why such a publish is one to retry).
    let uncertain = kinds
        .iter()
        .filter(|k| **k == BackendErrorKind::Uncertain)
        .count();
    assert!(
        uncertain >= stored as usize,
        "{stored} publishes reached the broker unconfirmed, yet only {uncertain} were \
         reported Uncertain: {kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_returns_within_its_bound_through_a_black_hole() {
    let broker = broker!("close_returns_within_its_bound_through_a_black_hole");
    let options = RabbitMqOptions::default().call_timeout(Duration::from_secs(2));
    let (proxy, backend, q) = through_proxy(&broker, "close-hole", options).await;
    // A consumer and a publishing channel are open when the network goes quiet.
    let _stream = within("consume", backend.consume(&QueueConfig::new(&q)))
        .await
        .expect("consuming");
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .expect("published");
    proxy.black_hole(true);
    let started = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(15), backend.close()).await;
    let took = started.elapsed();
    proxy.black_hole(false);
    assert!(
        closed.is_ok(),
        "close() did not return within 15 s through a black hole"
    );
    assert!(
        took < Duration::from_secs(8),
        "close() took {took:?} with a 2 s bound"
    );
    assert_eq!(backend.connection_state(), ConnectionState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_returns_within_its_bound_after_the_broker_cancelled_a_consumer() {
    let broker = broker!("close_returns_within_its_bound_after_the_broker_cancelled_a_consumer");
    // Measured before the reconnection work: 4 hangs in 29 tries.
    for round in 0..8 {
        let options = RabbitMqOptions::default()
            .call_timeout(Duration::from_secs(2))
            .connection_name(broker.connection_name(&format!("cancel-{round}")));
        let backend = within(
            "connect",
            RabbitMqBackend::with_options(&broker.url, broker.isolate(options)),
        )
        .await
        .expect("connects");
        let q = broker.queue("cancelled");
        within("declare", backend.declare(&[QueueConfig::new(&q)]))
            .await
            .unwrap();
        let stream = within("consume", backend.consume(&QueueConfig::new(&q)))
            .await
            .expect("consuming");
        broker.delete_raw(&q).await;
        tokio::time::sleep(Duration::from_millis(50 * round)).await;
        drop(stream);
        let started = Instant::now();
        let closed = tokio::time::timeout(Duration::from_secs(15), backend.close()).await;
        assert!(
            closed.is_ok(),
            "round {round}: close() did not return within 15 s after a consumer cancel"
        );
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(8),
            "round {round}: close() took {took:?}"
        );
    }
}

/// The recovery the docs give for an enqueue whose outcome is unknown:
/// enqueue the same job again under the same id. A unique job's claim
/// already belongs to that id, so the second try goes through, while any
/// other enqueue of the key is a duplicate of it.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_uncertain_enqueue_the_same_id_enqueues_again_and_others_are_duplicates() {
    use crate::fault::private_redis::PrivateRedis;
    use queuey::job::{Envelope, Unique, Uuid};
    use queuey::store::RedisStore;
    use queuey::{EnqueueOptions, Error};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct OneQueue;
    static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    impl queuey::Queues for OneQueue {
        const ALL: &'static [Self] = &[OneQueue];
        fn name(&self) -> &'static str {
            NAME.get().copied().unwrap_or("unset")
        }
        fn config(&self) -> QueueConfig {
            QueueConfig::new(self.name())
        }
    }
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Charge {
        order: u32,
    }
    impl queuey::Job for Charge {
        type Queues = OneQueue;
        type Output = ();
        const QUEUE: OneQueue = OneQueue;
        const NAME: &'static str = "charge";
    }

    let broker =
        broker!("after_an_uncertain_enqueue_the_same_id_enqueues_again_and_others_are_duplicates");
    let options = RabbitMqOptions::default().publish_timeout(Duration::from_secs(3));
    let (proxy, backend, q) = through_proxy(&broker, "uncertain-unique", options).await;
    NAME.set(Box::leak(q.clone().into_boxed_str())).unwrap();
    let redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let producer = queuey::Producer::<OneQueue, _>::builder(backend.clone())
        .store(store)
        .build_undeclared();
    let id = Uuid::new_v4();
    let options = EnqueueOptions::default()
        .job_id(id)
        .unique(Unique::key("order-42", Duration::from_secs(600)));
    // Warm the publishing channel up, then lose the confirmation.
    within("warm-up", backend.publish(&envelope(&q, 0)))
        .await
        .expect("warm-up publish");
    proxy.mute_replies(true);
    let publishing = tokio::spawn({
        let producer = producer.clone();
        let options = options.clone();
        async move { producer.enqueue_with(&Charge { order: 42 }, options).await }
    });
    within("the publish to reach the broker", async {
        while broker.ready(&q).await < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    proxy.refuse(true);
    proxy.cut();
    let first = within("the publish", publishing).await.unwrap();
    let error = first.expect_err("a publish whose confirm was lost is never a success");
    assert!(error.is_transient(), "{error}");
    proxy.mute_replies(false);
    proxy.refuse(false);
    wait_state(&backend, ConnectionState::Connected).await;

    let again = within(
        "the same job again",
        producer.enqueue_with(&Charge { order: 42 }, options),
    )
    .await
    .expect("the same id holds the claim");
    assert_eq!(again, id);
    let other = within(
        "another enqueue of the key",
        producer.enqueue_with(
            &Charge { order: 42 },
            EnqueueOptions::default().unique(Unique::key("order-42", Duration::from_secs(600))),
        ),
    )
    .await;
    assert!(
        matches!(other, Err(Error::Duplicate { existing_id }) if existing_id == id),
        "{other:?}"
    );
    // The broker holds the job twice at most, under one id.
    let _warm_up = broker.get(&q).await.expect("the warm-up message");
    let mut copies = 0;
    while let Some(message) = broker.get(&q).await {
        let envelope = Envelope::decode(&message.delivery.data).unwrap();
        assert_eq!(envelope.job_id, id);
        copies += 1;
    }
    assert!((1..=2).contains(&copies), "{copies} copies");
    within("close", backend.close()).await.unwrap();
}
