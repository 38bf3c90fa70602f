//! `queuey queues` against a real RabbitMQ: one line per work queue, a
//! sharded queue's counts summed, the pause from the control state, the
//! dead letters of its dead-letter queue.

use std::time::Duration;

use lapin::BasicProperties;
use queuey_core::backend::{Backend, Heartbeats};
use queuey_core::{Envelope, Uuid};
use serde_json::{Value, json};

use crate::tests::fleet::{beat, control_backend};
use crate::tests::support::{Harness, WAIT, dead_letter_jobs, harness, json, ok, within};

/// The line of `queue` in `queuey --json queues ARGS…` once `done` holds
/// for it (the management API's statistics lag the broker by seconds).
async fn line_once(
    h: &Harness,
    args: &[&str],
    queue: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut full = vec!["--json", "queues"];
        full.extend_from_slice(args);
        let listed = json(&h.cli(&full));
        let line = listed
            .as_array()
            .expect("a JSON array")
            .iter()
            .find(|l| l["queue"] == queue)
            .cloned();
        match line {
            Some(line) if done(&line) => return line,
            last if tokio::time::Instant::now() > deadline => {
                panic!("{queue} never got there; last: {last:?} of {listed}")
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_work_queue_is_one_line_with_its_counts_pause_and_dead_letters() {
    let h = harness!("queues");
    let q = h.queue("queues");
    let (backend, config) = h.backend(&q).await;
    let jobs = [("job_a".to_owned(), "boom".to_owned(), json!({}))];
    dead_letter_jobs(&backend, &config, &jobs).await;
    for i in 0..3 {
        let raw = serde_json::value::to_raw_value(&json!({ "i": i })).unwrap();
        let env = Envelope::new("job_a", config.name(), raw);
        within("publish", backend.publish(&env))
            .await
            .expect("publish");
    }
    drop(backend);
    ok(&h.cli(&["queue", "pause", &q, "--yes"]));

    let sharded = h.sharded_queue("queues-sharded", 2);
    let (sharded_backend, _) = h.sharded_backend(&sharded, 2).await;
    drop(sharded_backend);
    for (queue, n) in [(sharded.clone(), 1), (format!("{sharded}.s0"), 2)] {
        for _ in 0..n {
            h.publish_raw(&queue, b"job", BasicProperties::default())
                .await;
        }
    }
    h.publish_raw(
        &format!("{sharded}.s1.dead"),
        b"dead",
        BasicProperties::default(),
    )
    .await;

    let expected = json!({
        "queue": q, "shards": 0, "ready": 3, "unacked": 0, "consumers": 0,
        "paused": true, "dead": 1,
    });
    let settled = |line: &Value| *line == expected;
    line_once(&h, &[&q], &q, settled).await;
    let expected_sharded = json!({
        "queue": sharded, "shards": 2, "ready": 3, "unacked": 0, "consumers": 0,
        "paused": false, "dead": 1,
    });
    line_once(&h, &[&sharded], &sharded, |l| *l == expected_sharded).await;

    // Without QUEUE and no worker heard from: every work queue of the
    // vhost, the shards under theirs.
    let names = |args: &[&str]| -> Vec<String> {
        let listed = json(&h.cli(args));
        let names = listed.as_array().unwrap().iter();
        names
            .filter_map(|l| l["queue"].as_str().map(str::to_owned))
            .collect()
    };
    let every = names(&["--json", "queues"]);
    assert!(every.contains(&q) && every.contains(&sharded), "{every:?}");
    assert!(
        !every.iter().any(|n| n.starts_with(&format!("{sharded}.s"))),
        "a shard is not a line of its own: {every:?}"
    );
    let said = ok(&h.cli(&["queues"]));
    assert!(
        said.ends_with("(the workers' heartbeats name the fleet's queues)\n"),
        "{said}"
    );

    // Once a worker is heard from: the queues the fleet consumes, a shard
    // standing for its sharded queue; --all for every one.
    let worker = control_backend(&h, "queues-worker").await;
    let mut heartbeat = beat(&format!("{sharded}.s0"), Uuid::new_v4(), Duration::ZERO);
    heartbeat.queues.push("elsewhere".into());
    within("heartbeat", worker.heartbeat(&heartbeat))
        .await
        .unwrap();
    assert_eq!(names(&["--json", "queues"]), vec![sharded.clone()]);
    let all = names(&["--json", "queues", "--all"]);
    assert!(all.contains(&q) && all.contains(&sharded), "{all:?}");
    let said = ok(&h.cli(&["queues"]));
    let footer = "the queues the fleet's 1 worker(s) consume (--all lists every queue with a \
                  dead-letter queue); consumed but without a dead-letter queue: elsewhere\n";
    assert!(said.ends_with(footer), "{said}");
    worker.close().await.unwrap();

    let text = ok(&h.cli(&["queues", &q, &sharded]));
    let (table, footer) = text.trim_end().rsplit_once('\n').unwrap();
    assert_eq!(footer, "the queues named", "{text}");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec![
                "QUEUE",
                "SHARDS",
                "READY",
                "UNACKED",
                "CONSUMERS",
                "PAUSED",
                "DEAD"
            ],
            vec![q.as_str(), "-", "3", "0", "0", "yes", "1"],
            vec![sharded.as_str(), "2", "3", "0", "0", "no", "1"],
        ],
        "{text}"
    );

    // A dead-letter queue's name stands for its work queue; an unknown
    // name is an error that names it.
    let dead_named = json(&h.cli(&["--json", "queues", &format!("{q}.dead")]));
    assert_eq!(dead_named[0]["queue"], q);
    let missing = format!("{q}-missing");
    let out = h.cli(&["queues", &missing]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("queue `{missing}` does not exist")),
        "{err}"
    );
}
