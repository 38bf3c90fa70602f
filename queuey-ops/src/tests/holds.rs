//! `queuey holds` and `queuey topology` against the real broker.

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::Duration;

use lapin::BasicProperties;
use lapin::options::{BasicConsumeOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use queuey_core::Envelope;
use queuey_core::backend::Backend;
use queuey_rabbitmq::__private::field_table;
use queuey_rabbitmq::topology::hold_queue_arguments;
use serde_json::Value;

use crate::holds::regex_escape;
use crate::tests::support::{Harness, harness, json, ok, queuey_bin, within};

/// Declares `{queue}.deferred.{ttl}` with exactly the backend's arguments.
async fn declare_hold(h: &Harness, queue: &str, ttl: u64) -> String {
    let name = format!("{queue}.deferred.{ttl}");
    h.track(&name);
    let ch = h.amqp.channel().await.unwrap();
    let options = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(
        name.as_str().into(),
        options,
        field_table(&hold_queue_arguments(queue, ttl)),
    )
    .await
    .expect("hold declared");
    name
}

/// `rabbitmqctl list_queues`: name → (messages, consumers).
fn list_queues() -> BTreeMap<String, (u64, u64)> {
    let out = Command::new("rabbitmqctl")
        .args([
            "-q",
            "list_queues",
            "name",
            "messages",
            "consumers",
            "--no-table-headers",
        ])
        .output()
        .expect("rabbitmqctl runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut cols = line.split('\t');
            let name = cols.next()?.to_owned();
            let messages = cols.next()?.trim().parse().ok()?;
            let consumers = cols.next()?.trim().parse().ok()?;
            Some((name, (messages, consumers)))
        })
        .collect()
}

#[tokio::test]
async fn holds_counts_match_rabbitmqctl_and_release_times_come_from_due_at() {
    let h = harness!("holds_census");
    let q = h.queue("holds");
    let (backend, config) = h.backend(&q).await;
    for (delay, n) in [(60u64, 3), (120, 2)] {
        h.track(&format!("{q}.deferred.quorum.{}", delay * 1000));
        for _ in 0..n {
            let raw = serde_json::value::to_raw_value(&serde_json::json!({})).unwrap();
            let env = Envelope::new("later", config.name(), raw);
            backend
                .publish_after(&env, Duration::from_secs(delay))
                .await
                .expect("held");
        }
    }
    // A classic hold (a process with the first version's holds) whose jobs
    // carry due-at headers: only classic holds are read for release times.
    let long = declare_hold(&h, &q, 300_000).await;
    let now = crate::time::now_ms();
    let dues = [now + 290_000, now + 299_000];
    for due in dues {
        let mut headers = FieldTable::default();
        headers.insert("queuey-due-at".into(), AMQPValue::LongLongInt(due));
        h.publish_raw(
            &long,
            b"{}",
            BasicProperties::default().with_headers(headers),
        )
        .await;
    }

    let census = json(&h.cli(&["holds", &q, "--json"]));
    let holds = census[0]["holds"].as_array().unwrap();
    let by_delay: BTreeMap<u64, &Value> = holds
        .iter()
        .map(|h| (h["delay_ms"].as_u64().unwrap(), h))
        .collect();
    assert_eq!(
        by_delay.keys().copied().collect::<Vec<_>>(),
        vec![60_000, 120_000, 300_000]
    );
    // A quorum queue's count in the listing comes from statistics it
    // emits every few seconds: wait for it to catch up with the census.
    let counts = |h: &Value| {
        (
            h["jobs"].as_u64().unwrap(),
            h["consumers"].as_u64().unwrap(),
        )
    };
    let mut listed = list_queues();
    for _ in 0..40 {
        if holds
            .iter()
            .all(|h| listed.get(h["name"].as_str().unwrap()) == Some(&counts(h)))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        listed = list_queues();
    }
    for hold in holds {
        let name = hold["name"].as_str().unwrap();
        assert_eq!(listed.get(name), Some(&counts(hold)), "{name}");
    }
    assert_eq!(by_delay[&60_000]["jobs"], 3);
    assert_eq!(by_delay[&120_000]["jobs"], 2);
    assert_eq!(by_delay[&300_000]["earliest_release_ms"], dues[0]);
    assert_eq!(by_delay[&300_000]["latest_release_ms"], dues[1]);
    assert_eq!(by_delay[&300_000]["expires_ms"], 600_000);
    assert_eq!(by_delay[&300_000]["kind"], "classic");
    assert_eq!(by_delay[&60_000]["kind"], "quorum");
    assert_eq!(by_delay[&60_000]["jobs_read"], 0);
    // Nothing is due yet: a quorum hold has nothing releasing (or no
    // statistics yet), and a classic hold never has the figure.
    for delay in [60_000, 120_000] {
        let releasing = &by_delay[&delay]["releasing"];
        assert!(
            releasing.is_null() || releasing == 0,
            "{delay}: {releasing}"
        );
    }
    assert!(by_delay[&300_000]["releasing"].is_null());
    // Reading the holds put everything back.
    assert_eq!(h.ready(&long).await, 2);

    let text = ok(&h.cli(&["holds", &q]));
    assert!(text.contains("3 hold queues, 7 jobs waiting"), "{text}");
    assert!(text.contains("RELEASING"), "{text}");
    // Nothing is past its delay: the only note is why the quorum holds'
    // release times are bounds.
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert!(notes[0].contains("a quorum hold is not read"), "{text}");
    let prom = ok(&h.cli(&["holds", &q, "--prometheus"]));
    assert!(prom.contains("# TYPE queuey_hold_jobs gauge"), "{prom}");
    assert!(
        prom.contains(&format!(
            "queuey_hold_jobs{{queue=\"{q}\",kind=\"quorum\",delay_ms=\"60000\"}} 3"
        )),
        "{prom}"
    );
    assert!(
        prom.contains(&format!(
            "queuey_hold_consumers{{queue=\"{q}\",kind=\"quorum\",delay_ms=\"120000\"}} 0"
        )),
        "{prom}"
    );
    backend.close().await.unwrap();
}

/// Clears a policy on drop, even when the test fails.
struct Policy(String);

impl Policy {
    fn set(name: &str, pattern: &str, definition: &str) -> Policy {
        let out = Command::new("rabbitmqctl")
            .args([
                "-q",
                "set_policy",
                "--apply-to",
                "queues",
                name,
                pattern,
                definition,
            ])
            .output()
            .expect("rabbitmqctl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Policy(name.to_owned())
    }
}

impl Drop for Policy {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["-q", "clear_policy", &self.0])
            .output();
    }
}

fn problems(out: &Output) -> Vec<(String, String)> {
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "verify printed no JSON: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["queue"].as_str().unwrap().to_owned(),
                p["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn topology_verify_passes_on_what_the_backend_declares_and_apply_previews() {
    let h = harness!("topology_ok");
    let q = h.queue("topo-ok");
    let (backend, _config) = h.backend(&q).await;
    let out = ok(&h.cli(&["topology", "verify", "--queue", &q]));
    assert!(out.contains("topology ok"), "{out}");

    let fresh = h.queue("topo-apply");
    let out = ok(&h.cli(&[
        "topology",
        "apply",
        "--queue",
        &fresh,
        "--max-priority",
        "5",
    ]));
    assert!(out.contains("would declare 3 queue(s)"), "{out}");
    assert!(
        h.amqp.counts(&fresh).await.unwrap().is_none(),
        "preview declared nothing"
    );
    let out = ok(&h.cli(&[
        "topology",
        "apply",
        "--queue",
        &fresh,
        "--max-priority",
        "5",
        "--yes",
    ]));
    assert!(out.contains("declared 3 queue(s)"), "{out}");
    ok(&h.cli(&[
        "topology",
        "verify",
        "--queue",
        &fresh,
        "--max-priority",
        "5",
    ]));
    // The same queue checked against the default priorities is wrong.
    let out = h.cli(&["topology", "verify", "--queue", &fresh, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        problems(&out),
        vec![(fresh.clone(), "wrong_arguments".to_owned())]
    );
    backend.close().await.unwrap();
}

#[tokio::test]
async fn topology_verify_catches_arguments_orphans_policies_and_hold_consumers() {
    let h = harness!("topology_problems");
    // Wrong arguments: x-max-priority 5 where the set says 10.
    let wrong = h.queue("topo-wrong");
    ok(&h.cli(&[
        "topology",
        "apply",
        "--queue",
        &wrong,
        "--max-priority",
        "5",
        "--yes",
    ]));
    // An orphan hold queue: its work queue does not exist.
    let gone = h.queue("topo-gone");
    let orphan = declare_hold(&h, &gone, 5_000).await;
    // A policy setting message-ttl on a hold queue.
    let policed = h.queue("topo-policy");
    ok(&h.cli(&["topology", "apply", "--queue", &policed, "--yes"]));
    let policed_hold = declare_hold(&h, &policed, 60_000).await;
    let policy_name = format!("queuey-ops-test-{}", uuid::Uuid::new_v4().simple());
    let _policy = Policy::set(
        &policy_name,
        &format!("^{}$", regex_escape(&policed_hold)),
        r#"{"message-ttl":1000}"#,
    );
    // A consumer on a hold queue.
    let consumed = h.queue("topo-consumer");
    ok(&h.cli(&["topology", "apply", "--queue", &consumed, "--yes"]));
    let consumed_hold = declare_hold(&h, &consumed, 60_000).await;
    let ch = h.amqp.channel().await.unwrap();
    let _consumer = ch
        .basic_consume(
            consumed_hold.as_str().into(),
            "queuey-ops-test-thief".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consumer");

    let args = [
        "topology", "verify", "--queue", &wrong, "--queue", &gone, "--queue", &policed, "--queue",
        &consumed, "--json",
    ];
    // The management API reports policies with its statistics, which lag.
    let found = within("every problem reported", async {
        loop {
            let out = h.cli(&args);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let found = problems(&out);
            if found.iter().any(|(_, kind)| kind == "policy_override") {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    let expect = |queue: &str, kind: &str| {
        assert!(
            found.contains(&(queue.to_owned(), kind.to_owned())),
            "{kind} on {queue} not in {found:?}"
        );
    };
    expect(&wrong, "wrong_arguments");
    expect(&gone, "missing");
    expect(&orphan, "orphan_hold");
    expect(&policed_hold, "policy_override");
    expect(&consumed_hold, "hold_consumer");
    expect(&format!("{gone}.suspect"), "missing");
    assert_eq!(found.len(), 7, "{found:?}"); // gone.dead is missing too
    let text = String::from_utf8_lossy(&h.cli(&args[..args.len() - 1]).stdout).into_owned();
    assert!(text.contains("sets message-ttl = 1000"), "{text}");
    let _ = ch.close(200, "".into()).await;
}

/// `holds prune` previews, then deletes only the empty quorum holds: one
/// whose job came back is deleted, one with a job waiting is kept, and the
/// job is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_prune_previews_then_deletes_only_the_empty_holds() {
    let h = harness!("holds_prune");
    let q = h.queue("prune");
    let (backend, config) = h.backend(&q).await;
    let empty = format!("{q}.deferred.quorum.1000");
    let busy = format!("{q}.deferred.quorum.120000");
    h.track(&empty);
    h.track(&busy);
    for (n, delay) in [(1, 1), (2, 120)] {
        let raw = serde_json::value::to_raw_value(&serde_json::json!({ "n": n })).unwrap();
        let env = Envelope::new("later", config.name(), raw);
        within(
            "publish_after",
            backend.publish_after(&env, Duration::from_secs(delay)),
        )
        .await
        .expect("held");
    }
    // The first job comes back; the management API's statistics catch up
    // within a few seconds.
    let plan = within("the empty hold is a candidate", async {
        loop {
            let plan = json(&h.cli(&["holds", "prune", &q, "--json"]));
            let verdict = |hold: &str| {
                plan.as_array()
                    .unwrap()
                    .iter()
                    .find(|i| i["hold"] == hold)
                    .map(|i| (i["prune"].as_bool().unwrap(), i["reason"].clone()))
            };
            if verdict(&empty).is_some_and(|(prune, _)| prune) {
                assert_eq!(
                    verdict(&busy),
                    Some((false, Value::from("1 job(s) waiting")))
                );
                break plan;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    assert_eq!(plan.as_array().unwrap().len(), 2, "{plan}");
    // A preview deletes nothing.
    assert!(list_queues().contains_key(&empty));

    let args = ["holds", "prune", q.as_str(), "--yes"].map(str::to_owned);
    let run = {
        let url = h.url.clone();
        let control = h.control_stream();
        tokio::task::spawn_blocking(move || {
            Command::new(queuey_bin())
                .args(&args)
                .env("AMQP_URL", url)
                .env("QUEUEY_CONTROL_STREAM", control)
                .env_remove("QUEUEY_MGMT_URL")
                .output()
                .expect("the queuey binary runs")
        })
    };
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("holds prune --yes returns")
        .unwrap();
    let text = ok(&out);
    assert!(text.contains("deleted 1 of 1 hold queue(s)"), "{text}");
    let queues = list_queues();
    assert!(!queues.contains_key(&empty), "{text}");
    assert_eq!(queues.get(&busy), Some(&(1, 0)), "the waiting job is kept");
    assert_eq!(h.ready(&q).await, 1, "the job that came back is kept");
    backend.close().await.unwrap();
}

/// A classic queue that only has a quorum hold's name is not a hold:
/// `holds prune --yes` says so and leaves it, empty as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_prune_leaves_a_queue_that_only_looks_like_a_hold() {
    let h = harness!("holds_prune_lookalike");
    let q = h.queue("lookalike");
    let (backend, _) = h.backend(&q).await;
    let lookalike = format!("{q}.deferred.quorum.5000");
    h.track(&lookalike);
    let ch = h.amqp.channel().await.unwrap();
    ch.queue_declare(
        lookalike.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("classic queue declared");
    let _ = ch.close(200, "".into()).await;
    // Once the management API has statistics for it, an empty queue with
    // a hold's name is all a name-based check could ask for.
    let mgmt = crate::mgmt::Management::for_amqp_url(&h.url, None).unwrap();
    within("statistics for the queue", async {
        while mgmt
            .queue(&lookalike)
            .await
            .unwrap()
            .and_then(|info| info.messages)
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;

    let plan = json(&h.cli(&["holds", "prune", &q, "--json"]));
    let item = &plan.as_array().unwrap()[0];
    assert_eq!(item["hold"], lookalike.as_str(), "{plan}");
    assert_eq!(item["prune"], false, "{plan}");
    let reason = item["reason"].as_str().unwrap();
    assert!(reason.starts_with(crate::prune::LOOKALIKE), "{reason}");
    assert!(reason.contains("a classic queue, not quorum"), "{reason}");

    let args = ["holds", "prune", q.as_str(), "--yes"].map(str::to_owned);
    let run = {
        let url = h.url.clone();
        let control = h.control_stream();
        tokio::task::spawn_blocking(move || {
            Command::new(queuey_bin())
                .args(&args)
                .env("AMQP_URL", url)
                .env("QUEUEY_CONTROL_STREAM", control)
                .env_remove("QUEUEY_MGMT_URL")
                .output()
                .expect("the queuey binary runs")
        })
    };
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("holds prune --yes returns")
        .unwrap();
    let text = ok(&out);
    assert!(
        text.contains(&format!(
            "skipped {lookalike}: named like a quorum hold, but not a hold"
        )),
        "{text}"
    );
    assert!(text.contains("deleted 0 of 0 hold queue(s)"), "{text}");
    assert!(
        h.amqp.counts(&lookalike).await.unwrap().is_some(),
        "the queue is still there: {text}"
    );
    backend.close().await.unwrap();
}
