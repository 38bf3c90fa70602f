//! Control commands survive a broker restart: a queue paused before a
//! `kill -9` of its (private) node is still paused afterwards, for the
//! backends that followed it across the restart and for one started after
//! it, and a resume sent after the restart reaches them all.

use std::time::Duration;

use queuey::backend::ControlChannel;
use queuey::control::{Command, ControlRecord, ControlView};
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::within;

async fn backend(url: &str, name: &str) -> RabbitMqBackend {
    let options = RabbitMqOptions::default()
        .connection_name(format!("queuey-test-control-{name}"))
        .reconnect_delay(Duration::from_millis(100), Duration::from_millis(500));
    within("connect", RabbitMqBackend::with_options(url, options))
        .await
        .expect("connects to the private node")
}

async fn follow(backend: &RabbitMqBackend) -> ControlView {
    within("follow_control", backend.follow_control())
        .await
        .expect("follows")
}

/// Waits (bounded) until `done` holds for `view`.
async fn until(what: &str, view: &ControlView, done: impl Fn(&ControlView) -> bool) {
    within(what, async {
        while !done(view) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_survives_a_broker_restart_and_a_later_resume_reaches_everyone() {
    let mut node = private_node!("a_pause_survives_a_broker_restart");
    let url = node.url();
    let sender = backend(&url, "sender").await;
    let follower = backend(&url, "follower").await;
    let view = follow(&follower).await;
    let q = "app.emails";
    within(
        "pause",
        sender.send_control(&ControlRecord::new(Command::Pause { queue: q.into() })),
    )
    .await
    .unwrap();
    until("the pause", &view, |v| v.is_paused(q)).await;

    // Measured on RabbitMQ 3.10.8: a stream whose node is killed within
    // about a second of the stream's creation stays `down` after the
    // restart (one killed 3 s or more after it, even right after a
    // publish, comes back with every message). The control stream is
    // created once per virtual host, so give this young one a moment.
    tokio::time::sleep(Duration::from_secs(5)).await;
    node.kill9().await;
    node.restart().await;

    // Both backends reconnect; the follower keeps its state and follows
    // the stream again from where it was.
    let later = backend(&url, "later").await;
    assert!(
        follow(&later).await.is_paused(q),
        "a backend started after the restart reads the pause"
    );
    assert!(view.is_paused(q));
    within("resume", async {
        // The sender may still be reconnecting: a send fails until it is
        // back, and is sent again.
        loop {
            let resume = ControlRecord::new(Command::Resume { queue: q.into() });
            match sender.send_control(&resume).await {
                Ok(()) => break,
                Err(e) if e.is_transient() => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(e) => panic!("resume: {e}"),
            }
        }
    })
    .await;
    until("the resume at the follower", &view, |v| !v.is_paused(q)).await;
    let later_view = follow(&later).await;
    assert!(!later_view.is_paused(q));
    for b in [sender, follower, later] {
        b.close().await.unwrap();
    }
}
