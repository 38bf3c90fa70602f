//! What a producer publishes by hand to the fleet plane changes nothing;
//! what the operator sends is obeyed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Connection};
use queuey_core::backend::{Backend, Replies};
use queuey_core::backend::{ControlChannel, Heartbeats};
use queuey_core::control::{CancelFilter, Command, ControlRecord, ControlView, Heartbeat};
use queuey_core::periodic::Leadership;
use queuey_rabbitmq::RabbitMqOptions;
use queuey_rabbitmq::topology::CONTROL_STREAM;
use serde_json::json;
use uuid::Uuid;

use crate::roles::{OPERATOR, PRODUCER, Roles, WORKER};
use crate::support::within;

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

pub(crate) async fn confirm_channel(connection: &Connection) -> Channel {
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    channel
}

/// Publishes `body` to `queue` through the default exchange with
/// `properties`, and says whether the broker took it (a confirmed ack) —
/// `false` when it refused it or closed the channel.
pub(crate) async fn publish(
    channel: &Channel,
    queue: &str,
    body: &[u8],
    properties: BasicProperties,
) -> bool {
    let published = channel
        .basic_publish(
            ShortString::default(),
            queue.into(),
            BasicPublishOptions::default(),
            body,
            properties,
        )
        .await;
    match published {
        Ok(confirm) => matches!(confirm.await, Ok(c) if c.is_ack()),
        Err(_) => false,
    }
}

pub(crate) fn signed_as(user: &str) -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_user_id(user.into())
}

/// The forged commands: each would change what every worker does.
fn forged_commands(queue: &str) -> Vec<Vec<u8>> {
    let at = now_ms();
    let record = |command: Command| ControlRecord::new(command).encode();
    vec![
        // Cancels every job enqueued from now on, for good.
        json!({"id": Uuid::new_v4(), "at_ms": u64::MAX, "command": "cancel_matching", "filter": {}})
            .to_string()
            .into_bytes(),
        record(Command::Pause {
            queue: queue.to_owned(),
        }),
        record(Command::CancelMatching {
            filter: CancelFilter::new().queue(queue).enqueued_before(at),
        }),
        record(Command::Cancel {
            job_id: Uuid::new_v4(),
        }),
    ]
}

/// Follows the control stream as the worker does and returns its view
/// once it has read everything sent so far.
pub(crate) async fn caught_up(backend: &queuey_rabbitmq::RabbitMqBackend) -> ControlView {
    within("following the control stream", backend.follow_control())
        .await
        .expect("follow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_cannot_command_the_fleet_and_the_operator_can() {
    let test = "a_producer_cannot_command_the_fleet_and_the_operator_can";
    let node = private_node!(test);
    let prefix = format!("trust-{}", Uuid::new_v4().simple());
    let roles = Roles::create(&node, &prefix).await;
    let queue = format!("{prefix}.emails");

    let worker = roles
        .backend(
            WORKER,
            RabbitMqOptions::default().control_senders([OPERATOR]),
        )
        .await;
    let view = caught_up(&worker).await;

    // The producer publishes every forged command it can think of: unsigned,
    // and signed as itself (RabbitMQ vouches for that much).
    let raw = roles.raw(PRODUCER).await;
    let channel = confirm_channel(&raw).await;
    for body in forged_commands(&queue) {
        assert!(
            publish(&channel, CONTROL_STREAM, &body, BasicProperties::default()).await,
            "the producer may publish to the stream (the default exchange lets it)"
        );
        assert!(publish(&channel, CONTROL_STREAM, &body, signed_as(PRODUCER)).await);
    }
    // Nor can it sign as the operator: RabbitMQ closes its channel.
    let body = ControlRecord::new(Command::Pause {
        queue: queue.clone(),
    })
    .encode();
    let impersonating = confirm_channel(&raw).await;
    assert!(
        !publish(&impersonating, CONTROL_STREAM, &body, signed_as(OPERATOR)).await,
        "RabbitMQ must refuse a user_id that is not the connection's user"
    );

    // The worker, caught up with all of it, obeys none of it.
    let view_now = caught_up(&worker).await;
    let state = view_now.snapshot();
    assert!(!state.is_paused(&queue), "a forged pause was obeyed");
    assert_eq!(
        state.cancellations(),
        (0, 0),
        "a forged cancellation was obeyed"
    );
    let job = queuey_core::Envelope::new(
        "send",
        &queue,
        serde_json::value::to_raw_value(&json!({})).unwrap(),
    );
    assert!(!view.is_cancelled(&job));

    // The operator's own tool does not believe them either.
    let ops = roles
        .backend(
            OPERATOR,
            RabbitMqOptions::default().worker_senders([WORKER]),
        )
        .await;
    let ops_view = caught_up(&ops).await;
    assert!(!ops_view.is_paused(&queue));

    // What the operator sends, the worker obeys.
    within(
        "the operator's pause",
        ops.send_control(&ControlRecord::new(Command::Pause {
            queue: queue.clone(),
        })),
    )
    .await
    .expect("the operator may pause");
    assert!(caught_up(&worker).await.is_paused(&queue));
    // And the operator can withdraw a cancellation it sent.
    let cancel = ControlRecord::new(
        CancelFilter::new()
            .queue(&queue)
            .into_command()
            .expect("a filter"),
    );
    ops.send_control(&cancel).await.expect("cancel");
    assert_eq!(caught_up(&worker).await.snapshot().cancellations(), (0, 1));
    ops.send_control(&ControlRecord::new(Command::Revoke { record: cancel.id }))
        .await
        .expect("revoke");
    assert_eq!(caught_up(&worker).await.snapshot().cancellations(), (0, 0));

    // A backend that is the producer cannot pass its forgeries off as
    // commands either: sending one is refused before it leaves.
    let producer = roles.backend(PRODUCER, RabbitMqOptions::default()).await;
    let everything = ControlRecord::new(Command::CancelMatching {
        filter: CancelFilter::new(),
    });
    assert!(producer.send_control(&everything).await.is_err());

    producer.close().await.ok();
    ops.close().await.ok();
    worker.close().await.ok();
    let _ = raw.close(200, "done".into()).await;
}

fn heartbeat(host: &str) -> Heartbeat {
    Heartbeat {
        worker_id: Uuid::new_v4(),
        host: host.to_owned(),
        name: None,
        pid: 1,
        version: "0".into(),
        queues: vec![],
        paused: vec![],
        concurrency: 1,
        connection: "connected".into(),
        started_at_ms: now_ms(),
        at_ms: now_ms(),
        interval_ms: 5_000,
        stopping: false,
        running: vec![],
        totals: vec![],
        limits: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_heartbeats_and_schedule_states_are_ignored() {
    let test = "forged_heartbeats_and_schedule_states_are_ignored";
    let node = private_node!(test);
    let prefix = format!("trust-{}", Uuid::new_v4().simple());
    let roles = Roles::create(&node, &prefix).await;
    let heartbeats = format!("{CONTROL_STREAM}.workers");

    let worker = roles.backend(WORKER, RabbitMqOptions::default()).await;
    let honest = heartbeat("worker-host");
    worker.heartbeat(&honest).await.expect("a heartbeat");

    let raw = roles.raw(PRODUCER).await;
    let channel = confirm_channel(&raw).await;
    let forged = heartbeat("\u{1b}]0;forged\u{7}");
    for properties in [BasicProperties::default(), signed_as(PRODUCER)] {
        assert!(publish(&channel, &heartbeats, &forged.encode(), properties).await);
    }

    let ops = roles
        .backend(
            OPERATOR,
            RabbitMqOptions::default().worker_senders([WORKER]),
        )
        .await;
    let listed = within("listing workers", ops.workers())
        .await
        .expect("workers");
    let ids: Vec<Uuid> = listed.iter().map(|w| w.worker_id).collect();
    assert_eq!(
        ids,
        [honest.worker_id],
        "only the worker's own heartbeat counts"
    );

    // A schedule: the worker leads it and records a tick an hour ago.
    let key = format!("{prefix}.periodic.nightly");
    let tick = UNIX_EPOCH + Duration::from_millis(now_ms() - 3_600_000);
    let mut lease = within("leading", worker.lead(&key)).await.expect("lead");
    lease.record(tick).await.expect("record");
    lease.release().await;

    // The producer slips in states of its own: one far in the future
    // (which would freeze the schedule), one merely later.
    for last in [253_402_300_800_000u64, now_ms()] {
        let body = json!({"v": 1, "last_tick_ms": last}).to_string();
        assert!(publish(&channel, &key, body.as_bytes(), signed_as(PRODUCER)).await);
    }
    // And a worker's own state from the future is not believed either.
    let worker_raw = roles.raw(WORKER).await;
    let worker_channel = confirm_channel(&worker_raw).await;
    let body = json!({"v": 1, "last_tick_ms": 253_402_300_800_000u64}).to_string();
    assert!(publish(&worker_channel, &key, body.as_bytes(), signed_as(WORKER)).await);

    let lease = within("leading again", worker.lead(&key))
        .await
        .expect("lead");
    assert_eq!(
        lease.last_tick(),
        Some(tick),
        "the next leader must keep the last tick a worker recorded"
    );
    lease.release().await;

    let _ = raw.close(200, "done".into()).await;
    let _ = worker_raw.close(200, "done".into()).await;
    ops.close().await.ok();
    worker.close().await.ok();
}

/// A caller waiting for a job's result takes it only from a worker: an
/// operator who can read the job (and so its reply address) and answers
/// first is ignored, and the worker's real answer still arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_from_anyone_but_a_worker_is_ignored() {
    use lapin::options::{BasicGetOptions, BasicRejectOptions};
    use queuey_core::backend::{Reply, ReplyTo};

    let test = "a_reply_from_anyone_but_a_worker_is_ignored";
    let node = private_node!(test);
    let prefix = format!("trust-{}", Uuid::new_v4().simple());
    let roles = Roles::create(&node, &prefix).await;
    let queue = format!("{prefix}.reports");

    let worker = roles.backend(WORKER, RabbitMqOptions::default()).await;
    worker
        .declare(&[queuey_core::QueueConfig::new(&queue)])
        .await
        .expect("declare");
    let producer = roles
        .backend(
            PRODUCER,
            RabbitMqOptions::default().worker_senders([WORKER]),
        )
        .await;
    let job = queuey_core::Envelope::new(
        "report",
        &queue,
        serde_json::value::to_raw_value(&json!({"n": 1})).unwrap(),
    );
    let pending = within("requesting", producer.request(job))
        .await
        .expect("the job is enqueued");

    // The operator reads the job, answers first, and puts it back.
    let ops = roles.raw(OPERATOR).await;
    let ops_channel = confirm_channel(&ops).await;
    let taken = within(
        "reading the job",
        ops_channel.basic_get(queue.as_str().into(), BasicGetOptions::default()),
    )
    .await
    .expect("basic.get")
    .expect("the job is there");
    let address = taken.delivery.properties.reply_to().clone().unwrap();
    let correlation = taken.delivery.properties.correlation_id().clone().unwrap();
    let forged = Reply::NoValue("forged by the operator".into())
        .encode()
        .unwrap();
    let answered = ops_channel
        .basic_publish(
            ShortString::default(),
            address.clone(),
            BasicPublishOptions::default(),
            &forged,
            signed_as(OPERATOR).with_correlation_id(correlation.clone()),
        )
        .await;
    assert!(answered.is_ok(), "the operator may publish its answer");
    taken
        .delivery
        .acker
        .reject(BasicRejectOptions { requeue: true })
        .await
        .expect("requeue");

    // The worker's answer is the one the caller gets.
    let to = ReplyTo::new(address.as_str(), correlation.as_str());
    worker
        .reply(&to, Reply::NoValue("from the worker".into()))
        .await
        .expect("the worker replies");
    let got = within("the reply", pending).await.expect("a reply");
    assert!(
        matches!(&got, Reply::NoValue(text) if text == "from the worker"),
        "{got:?}"
    );

    let _ = ops.close(200, "done".into()).await;
    producer.close().await.ok();
    worker.close().await.ok();
}
