//! The cluster kit itself, with a raw AMQP client (no queuey): three
//! private nodes form a cluster, a quorum queue declared through node 1 is
//! led there and has a member on every node, a `kill -9` of node 1 moves
//! the leadership and keeps the message, node 1 started again rejoins, and
//! restarting a leader's Raft member moves the leadership.

use std::time::Duration;

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties};

use crate::support::within;

/// A named raw connection to `url` and a channel with confirms.
async fn channel(url: &str, name: &str) -> (Connection, lapin::Channel) {
    let properties = ConnectionProperties::default().with_connection_name(LongString::from(name));
    let connection = within("connect", Connection::connect(url, properties))
        .await
        .expect("connects");
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    (connection, channel)
}

/// Ignored in the suite: the failover test (`cluster.rs`) exercises every
/// part of the kit and a second cluster would double the suite's cost. Run
/// it alone to check the kit:
/// `cargo test -p queuey --test faults cluster_kit -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the failover test covers the kit in the suite; run alone to check the kit"]
async fn a_cluster_forms_loses_a_node_and_takes_it_back() {
    let _one = crate::private::one_cluster_at_a_time().await;
    let mut cluster = private_cluster!("kit", 3);
    let (started, joined) = cluster.formed_in();
    eprintln!("nodes started in {started:?}, joined in {joined:?}");
    let running = cluster.running().await.expect("cluster_status");
    assert_eq!(running.len(), 3, "{running:?}");

    // A quorum queue declared through node 1 is led by node 1.
    let q = format!("queuey-kit.{}", uuid::Uuid::new_v4().simple());
    let name = format!("queuey-kit-client-{}", uuid::Uuid::new_v4().simple());
    let (first, on_first) = channel(&cluster.node(0).url(), &name).await;
    let mut arguments = FieldTable::default();
    arguments.insert(
        ShortString::from("x-queue-type"),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    on_first
        .queue_declare(
            ShortString::from(q.as_str()),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            arguments,
        )
        .await
        .expect("a quorum queue");
    let confirm = on_first
        .basic_publish(
            ShortString::default(),
            ShortString::from(q.as_str()),
            BasicPublishOptions::default(),
            b"kept",
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .expect("published")
        .await
        .expect("confirmed");
    assert!(confirm.is_ack());
    let placed = cluster
        .await_leaders(&q, 1, Duration::from_secs(30))
        .await
        .expect("a leader");
    assert_eq!(placed[&q].leader, Some(0), "{placed:?}");
    assert_eq!(placed[&q].members, vec![0, 1, 2], "{placed:?}");
    let on = cluster.connection_nodes(&[&name]).await.expect("listed");
    assert_eq!(on.get(&name), Some(&0), "{on:?}");

    // Node 1 dies: another leads, and the message is still there.
    cluster.kill9(0).await;
    drop(first);
    let placed = cluster
        .await_leaders(&q, 1, Duration::from_secs(60))
        .await
        .expect("a new leader");
    let leader = placed[&q].leader.expect("a leader");
    assert_ne!(leader, 0, "{placed:?}");
    eprintln!("after the kill: {q}: {}", placed[&q]);
    let second_name = format!("{name}-2");
    let (second, on_second) = channel(&cluster.node(1).url(), &second_name).await;
    let got = on_second
        .basic_get(
            ShortString::from(q.as_str()),
            BasicGetOptions { no_ack: true },
        )
        .await
        .expect("basic.get")
        .expect("the message outlived its leader");
    assert_eq!(got.delivery.data, b"kept");
    let on = cluster
        .connection_nodes(&[&second_name])
        .await
        .expect("listed");
    assert_eq!(on.get(&second_name), Some(&1), "{on:?}");

    // Node 1 comes back into the cluster and the queue's membership.
    cluster.restart(0).await;
    assert_eq!(cluster.running().await.expect("cluster_status").len(), 3);
    let placed = cluster
        .await_leaders(&q, 1, Duration::from_secs(60))
        .await
        .expect("a leader");
    let back = within("node 1 back online in the queue", async {
        loop {
            let placed = cluster.placements(&q).await.expect("listed");
            if placed[&q].online.len() == 3 {
                return placed;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    eprintln!("after the restart: {q}: {} / {}", placed[&q], back[&q]);

    // Restarting its leader's Raft member hands the queue to another node.
    let old = cluster
        .restart_leader(&q)
        .await
        .expect("the leader restarts");
    let moved = cluster
        .await_leaders(&q, 1, Duration::from_secs(60))
        .await
        .expect("a leader");
    eprintln!("after restarting n{}'s member: {q}: {}", old + 1, moved[&q]);
    assert_ne!(moved[&q].leader, Some(old), "{moved:?}");
    drop(second);
    let stopping = std::time::Instant::now();
    drop(cluster);
    eprintln!("cluster stopped in {:?}", stopping.elapsed());
}
