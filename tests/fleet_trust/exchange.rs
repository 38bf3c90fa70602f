//! A fleet whose jobs go through a job exchange: the producer's credential
//! has no right on the default exchange, so it can enqueue (now, after a
//! delay, waiting for a result) and cannot write one record into the
//! control stream, let alone a flood of them.

use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{BasicPublishOptions, QueueBindOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Confirmation};
use queuey_core::QueueConfig;
use queuey_core::backend::{Backend, Replies, Reply};
use queuey_core::control::{Command, ControlRecord};
use queuey_rabbitmq::RabbitMqOptions;
use queuey_rabbitmq::topology::CONTROL_STREAM;
use serde_json::json;
use uuid::Uuid;

use crate::forged::{caught_up, confirm_channel, publish, signed_as};
use crate::roles::{OPERATOR, PRODUCER, Roles, WORKER};
use crate::support::within;

fn job(queue: &str, n: u32) -> queuey_core::Envelope {
    queuey_core::Envelope::new(
        "send",
        queue,
        serde_json::value::to_raw_value(&json!({ "n": n })).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_behind_the_job_exchange_enqueues_and_cannot_reach_the_fleet() {
    let test = "a_producer_behind_the_job_exchange_enqueues_and_cannot_reach_the_fleet";
    let node = private_node!(test);
    let prefix = format!("trust-{}", Uuid::new_v4().simple());
    let exchange = format!("{prefix}.jobs");
    let roles = Roles::behind_job_exchange(&node, &prefix, &exchange).await;
    let queue = format!("{prefix}.emails");
    let config = QueueConfig::new(&queue);

    let worker = roles
        .backend(
            WORKER,
            RabbitMqOptions::default()
                .job_exchange(&exchange)
                .control_senders([OPERATOR]),
        )
        .await;
    worker
        .declare(std::slice::from_ref(&config))
        .await
        .expect("the worker declares the exchange and binds its queue");
    assert!(!caught_up(&worker).await.is_paused(&queue));

    // The producer enqueues now, after a delay, and for a caller who
    // waits: every job through the exchange.
    let producer = roles
        .backend(
            PRODUCER,
            RabbitMqOptions::default()
                .job_exchange(&exchange)
                .worker_senders([WORKER]),
        )
        .await;
    producer
        .declare(std::slice::from_ref(&config))
        .await
        .expect("the producer may declare and bind its own queue");
    within("enqueue", producer.publish(&job(&queue, 1)))
        .await
        .expect("a job");
    let held_at = Instant::now();
    within(
        "enqueue after a delay",
        producer.publish_after(&job(&queue, 2), Duration::from_secs(1)),
    )
    .await
    .expect("a held job");
    let pending = within("enqueue and wait", producer.request(job(&queue, 3)))
        .await
        .expect("a job with a caller waiting");

    // The worker receives all three, the one for later no earlier than it
    // is due, and answers the waiting caller.
    let mut stream = within("consume", worker.consume(&config))
        .await
        .expect("the worker consumes");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let delivery = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("a job arrives")
            .expect("a delivery")
            .expect("not an error");
        let n = delivery
            .envelope()
            .payload_as::<serde_json::Value>()
            .unwrap()["n"]
            .as_u64()
            .unwrap_or_default();
        if n == 2 {
            assert!(held_at.elapsed() >= Duration::from_secs(1), "early");
        }
        if let Some(to) = delivery.envelope().reply_to.clone() {
            worker
                .reply(&to, Reply::NoValue("sent".into()))
                .await
                .expect("the worker answers");
        }
        within("ack", delivery.ack()).await.expect("ack");
        seen.push(n);
    }
    drop(stream);
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 3]);
    let answer = within("the result", pending).await.expect("a result");
    assert!(
        matches!(&answer, Reply::NoValue(t) if t == "sent"),
        "{answer:?}"
    );

    // The same credential, by hand, cannot reach the fleet: the default
    // exchange refuses it outright...
    let raw = roles.raw(PRODUCER).await;
    let pause = ControlRecord::new(Command::Pause {
        queue: queue.clone(),
    })
    .encode();
    let refused = confirm_channel(&raw).await;
    assert!(
        !publish(&refused, CONTROL_STREAM, &pause, signed_as(PRODUCER)).await,
        "the default exchange must refuse a producer behind the job exchange"
    );
    for stream in [CONTROL_STREAM, "queuey.control.workers"] {
        let channel = confirm_channel(&raw).await;
        assert!(!publish(&channel, stream, b"{}", BasicProperties::default()).await);
    }
    // ...the job exchange routes nothing to the stream (it comes back)...
    let channel = confirm_channel(&raw).await;
    let confirm = channel
        .basic_publish(
            exchange.as_str().into(),
            CONTROL_STREAM.into(),
            BasicPublishOptions {
                mandatory: true,
                immediate: false,
            },
            &pause,
            signed_as(PRODUCER),
        )
        .await
        .expect("published")
        .await
        .expect("confirmed");
    assert!(
        matches!(confirm, Confirmation::Ack(Some(_))),
        "the stream must not be reachable through the job exchange: {confirm:?}"
    );
    // ...and the producer may not bind the stream to it.
    let channel = raw.create_channel().await.expect("a channel");
    let bound = channel
        .queue_bind(
            CONTROL_STREAM.into(),
            exchange.as_str().into(),
            CONTROL_STREAM.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await;
    assert!(bound.is_err(), "the producer bound the control stream");

    // Nothing reached the worker's view.
    assert!(!caught_up(&worker).await.is_paused(&queue));

    let _ = raw.close(200, "done".into()).await;
    producer.close().await.ok();
    worker.close().await.ok();
}
