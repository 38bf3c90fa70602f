//! The tools over a sharded queue: its lane and every shard as one queue,
//! each item with its shard, a shard still nameable on its own.

use std::collections::BTreeMap;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};
use queuey_core::backend::Backend;
use queuey_core::{Envelope, QueueConfig, QueueType};
use serde_json::{Value, json};

use crate::tests::support::{Harness, Made, dead_letter_jobs, harness, json, ok, within};
use crate::tests::web_exposure::{Dashboard, http};

/// Dead-letters `n` jobs through the broker queue `physical` (the lane or
/// one shard of a sharded queue), each with a reason naming `tag`.
async fn dead_on(
    backend: &queuey_rabbitmq::RabbitMqBackend,
    physical: &QueueConfig,
    n: usize,
    tag: &str,
) -> Vec<Made> {
    let jobs: Vec<_> = (0..n)
        .map(|i| {
            (
                format!("job_{tag}"),
                format!("failed on {tag} ({i})"),
                json!({ "on": tag, "i": i }),
            )
        })
        .collect();
    dead_letter_jobs(backend, physical, &jobs).await
}

fn ids(made: &[Made]) -> Vec<String> {
    made.iter().map(|m| m.job_id.to_string()).collect()
}

/// The job ids waiting on `queue`, read from its head and put back.
async fn waiting(h: &Harness, queue: &str) -> Vec<String> {
    within(
        "browse",
        crate::tests::helpers::browse(&h.amqp, queue, None),
    )
    .await
    .unwrap_or_else(|e| panic!("{queue}: {e}"))
    .iter()
    .map(|held| {
        Envelope::decode(&held.body)
            .expect("an envelope")
            .job_id
            .to_string()
    })
    .collect()
}

/// `queue → count` of a `queues` array of the JSON output.
fn per_queue(value: &Value) -> BTreeMap<String, (Value, u64)> {
    value
        .as_array()
        .expect("a queues array")
        .iter()
        .map(|q| {
            (
                q["dead_queue"].as_str().unwrap().to_owned(),
                (q["shard"].clone(), q["count"].as_u64().unwrap()),
            )
        })
        .collect()
}

#[tokio::test]
async fn dead_letters_of_every_shard_are_listed_with_their_shard_and_go_back_to_it() {
    let h = harness!("shards_dead");
    let q = h.sharded_queue("shards-dead", 3);
    let (backend, config) = h.sharded_backend(&q, 3).await;
    let physical = config.physical();
    let lane = dead_on(&backend, &physical[0], 2, "lane").await;
    let s0 = dead_on(&backend, &physical[1], 3, "s0").await;
    let s2 = dead_on(&backend, &physical[3], 4, "s2").await;
    let s2_queue = format!("{q}.s2");

    // ls: the lane's letters, then each shard's, each with its shard.
    let listed = json(&h.cli(&["dead", "ls", &q, "--limit", "100", "--json"]));
    assert_eq!(listed["total"], 9);
    assert_eq!(listed["sharded"], true);
    let seen: Vec<(String, Value)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["id"].as_str().unwrap().to_owned(), i["shard"].clone()))
        .collect();
    let expected: Vec<(String, Value)> = [(&lane, Value::Null), (&s0, json!(0)), (&s2, json!(2))]
        .into_iter()
        .flat_map(|(made, shard)| ids(made).into_iter().map(move |id| (id, shard.clone())))
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(
        per_queue(&listed["queues"]),
        BTreeMap::from([
            (format!("{q}.dead"), (Value::Null, 2)),
            (format!("{q}.s0.dead"), (json!(0), 3)),
            (format!("{q}.s1.dead"), (json!(1), 0)),
            (format!("{q}.s2.dead"), (json!(2), 4)),
        ])
    );
    let text = ok(&h.cli(&["dead", "ls", &q]));
    assert!(text.starts_with("SHARD"), "{text}");
    assert!(
        text.contains("showing 9 of 9 matching (9 dead letters: lane 2, s0 3, s1 0, s2 4)"),
        "{text}"
    );
    // Newest first is the same order reversed, across shards.
    let newest = json(&h.cli(&["dead", "ls", &q, "--newest", "--limit", "5", "--json"]));
    let newest_ids: Vec<&str> = newest["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    let tail: Vec<String> = expected
        .iter()
        .rev()
        .take(5)
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(newest_ids, tail);

    // stats: all of them, counted per shard as well.
    let stats = json(&h.cli(&["dead", "stats", &q, "--json"]));
    assert_eq!(stats["total"], 9);
    assert_eq!(per_queue(&stats["queues"])[&format!("{q}.s2.dead")].1, 4);
    let text = ok(&h.cli(&["dead", "stats", &q]));
    assert!(text.contains("lane 2, s0 3, s1 0, s2 4"), "{text}");

    // show: found on its shard; a position needs the shard named.
    let id = s2[1].job_id.to_string();
    let shown = json(&h.cli(&["dead", "show", &q, &id, "--json"]));
    assert_eq!(shown["summary"]["shard"], 2);
    assert_eq!(shown["summary"]["position"], 2);
    let text = ok(&h.cli(&["dead", "show", &q, &id]));
    assert!(
        text.contains(&format!("(#2 in {q}.s2.dead, shard s2)")),
        "{text}"
    );
    let refused = h.cli(&["dead", "show", &q, "#2"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("position") && err.contains(".s0"), "{err}");
    let by_position = json(&h.cli(&["dead", "show", &s2_queue, "#2", "--json"]));
    assert_eq!(by_position["summary"]["id"], id.as_str());

    // One shard named on its own: just that shard.
    let one = json(&h.cli(&["dead", "ls", &s2_queue, "--json"]));
    assert_eq!(one["total"], 4);
    assert_eq!(one["sharded"], false);
    let one_ids: Vec<&str> = one["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(one_ids, ids(&s2));

    // A letter in shard 1's dead-letter queue that died on shard 0 (moved
    // there by hand): it is not shard 1's to take back.
    let stray = Envelope::new(
        "job_stray",
        format!("{q}.s0"),
        serde_json::value::to_raw_value(&json!({})).unwrap(),
    );
    let mut headers = FieldTable::default();
    headers.insert(
        "x-original-queue".into(),
        AMQPValue::LongString(format!("{q}.s0").into()),
    );
    headers.insert(
        "x-death-reason".into(),
        AMQPValue::LongString("stray".into()),
    );
    h.publish_raw(
        &format!("{q}.s1.dead"),
        &stray.encode().unwrap(),
        BasicProperties::default().with_headers(headers),
    )
    .await;

    // The preview: each shard's letters back to that shard.
    let preview = json(&h.cli(&["dead", "redrive", &q, "--json"]));
    let plan = &preview["plan"];
    assert_eq!(plan["would_move"], 9);
    assert_eq!(plan["foreign"], 1);
    // (queue, moves) → (letters, foreign)
    let targets: BTreeMap<(String, bool), (u64, bool)> = plan["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                (
                    t["queue"].as_str().unwrap().to_owned(),
                    t["moves"].as_bool().unwrap(),
                ),
                (
                    t["letters"].as_u64().unwrap(),
                    t["foreign"].as_bool().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(
        targets,
        BTreeMap::from([
            ((q.clone(), true), (2, false)),
            ((format!("{q}.s0"), true), (3, false)),
            ((s2_queue.clone(), true), (4, false)),
            // The stray letter stays: shard 0 is not shard 1's queue.
            ((format!("{q}.s0"), false), (1, true)),
        ])
    );

    // Redriving one shard moves only its letters, back to it.
    ok(&h.cli(&["dead", "redrive", &s2_queue, "--yes", "--no-progress"]));
    assert_eq!(waiting(&h, &s2_queue).await, ids(&s2));
    assert_eq!(h.ready(&format!("{q}.s2.dead")).await, 0);
    assert_eq!(h.ready(&format!("{q}.dead")).await, 2);
    assert_eq!(h.ready(&format!("{q}.s0.dead")).await, 3);

    // The rest: each back to the queue it died on, none to another shard.
    let report = json(&h.cli(&["dead", "redrive", &q, "--yes", "--json"]));
    assert_eq!(report["moved"], 5);
    assert_eq!(report["foreign"], 1);
    assert_eq!(
        report["moved_to"],
        json!({ q.clone(): 2, format!("{q}.s0"): 3 })
    );
    assert_eq!(waiting(&h, &q).await, ids(&lane));
    assert_eq!(waiting(&h, &format!("{q}.s0")).await, ids(&s0));
    assert_eq!(waiting(&h, &format!("{q}.s1")).await, Vec::<String>::new());
    assert_eq!(waiting(&h, &s2_queue).await, ids(&s2));
    for dead in ["dead", "s0.dead", "s2.dead"] {
        assert_eq!(h.ready(&format!("{q}.{dead}")).await, 0, "{dead}");
    }
    // The stray letter is still where it was.
    assert_eq!(h.ready(&format!("{q}.s1.dead")).await, 1);
    let _ = backend.close().await;
}

#[tokio::test]
async fn a_purge_exports_every_shard_into_one_file_and_an_import_puts_each_back() {
    let h = harness!("shards_purge");
    let q = h.sharded_queue("shards-purge", 2);
    let (backend, config) = h.sharded_backend(&q, 2).await;
    let physical = config.physical();
    dead_on(&backend, &physical[0], 1, "lane").await;
    dead_on(&backend, &physical[2], 2, "s1").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.jsonl");
    let file = file.to_str().unwrap();

    // A position would name one letter in each queue: refused, no file.
    let refused = h.cli(&["dead", "purge", &q, "--id", "#1", "--export", file, "--yes"]);
    assert!(!refused.status.success());
    assert!(!std::path::Path::new(file).exists());

    let preview = json(&h.cli(&["dead", "purge", &q, "--export", file, "--json"]));
    assert_eq!(preview["plan"]["matching"], 3);
    assert!(!std::path::Path::new(file).exists());

    let report = json(&h.cli(&["dead", "purge", &q, "--export", file, "--yes", "--json"]));
    assert_eq!(report["purged"], 3);
    assert_eq!(per_queue(&report["queues"])[&format!("{q}.s1.dead")].1, 2);
    for dead in ["dead", "s0.dead", "s1.dead"] {
        assert_eq!(h.ready(&format!("{q}.{dead}")).await, 0, "{dead}");
    }

    ok(&h.cli(&["dead", "import", file, "--yes"]));
    assert_eq!(h.ready(&format!("{q}.dead")).await, 1);
    assert_eq!(h.ready(&format!("{q}.s0.dead")).await, 0);
    assert_eq!(h.ready(&format!("{q}.s1.dead")).await, 2);
    let _ = backend.close().await;
}

#[tokio::test]
async fn holds_cover_the_lane_and_every_shard() {
    let h = harness!("shards_holds");
    let q = h.sharded_queue("shards-holds", 2);
    let (backend, _) = h.sharded_backend(&q, 2).await;
    let s1 = format!("{q}.s1");
    for (queue, n) in [(q.as_str(), 1), (s1.as_str(), 2)] {
        h.track(&format!("{queue}.deferred.quorum.60000"));
        for _ in 0..n {
            let raw = serde_json::value::to_raw_value(&json!({})).unwrap();
            let env = Envelope::new("later", queue, raw);
            within("hold", backend.publish_after(&env, Duration::from_secs(60)))
                .await
                .expect("held");
        }
    }

    let census = json(&h.cli(&["holds", &q, "--json"]));
    assert_eq!(census[0]["shards"], 2);
    let holds: Vec<(String, Value, String, u64)> = census[0]["holds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_owned(),
                h["shard"].clone(),
                h["work_queue"].as_str().unwrap().to_owned(),
                h["jobs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        holds,
        [
            (
                format!("{q}.deferred.quorum.60000"),
                Value::Null,
                q.clone(),
                1
            ),
            (
                format!("{s1}.deferred.quorum.60000"),
                json!(1),
                s1.clone(),
                2
            ),
        ]
    );
    let text = ok(&h.cli(&["holds", &q]));
    assert!(
        text.contains("(lane and 2 shards): 2 hold queues"),
        "{text}"
    );
    assert!(text.contains("SHARD") && text.contains("s1"), "{text}");
    let metrics = ok(&h.cli(&["holds", &q, "--prometheus"]));
    assert!(
        metrics.contains(&format!(
            "queuey_hold_jobs{{queue=\"{q}\",shard=\"1\",kind=\"quorum\",delay_ms=\"60000\"}} 2"
        )),
        "{metrics}"
    );

    // One shard named: its holds alone.
    let one = json(&h.cli(&["holds", &s1, "--json"]));
    assert_eq!(one[0]["shards"], 0);
    assert_eq!(one[0]["holds"].as_array().unwrap().len(), 1);

    // Prune previews every shard's holds, each for its own work queue.
    let items = json(&h.cli(&["holds", "prune", &q, "--json"]));
    let items: Vec<(String, String, bool)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["hold"].as_str().unwrap().to_owned(),
                i["queue"].as_str().unwrap().to_owned(),
                i["prune"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        items,
        [
            (format!("{q}.deferred.quorum.60000"), q.clone(), false),
            (format!("{s1}.deferred.quorum.60000"), s1.clone(), false),
        ]
    );
    let _ = backend.close().await;
}

#[tokio::test]
async fn topology_declares_and_checks_every_shard_and_finds_one_too_many() {
    let h = harness!("shards_topology");
    let q = h.sharded_queue("shards-topology", 3);
    let set = ["--queue", q.as_str(), "--quorum"];
    let with = |extra: &[&str]| -> Vec<String> {
        set.iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    let run = |args: Vec<String>| h.cli(&args.iter().map(String::as_str).collect::<Vec<_>>());

    let mut apply = vec!["topology".to_owned(), "apply".to_owned()];
    apply.extend(with(&["--shards", "2", "--json"]));
    let preview = json(&run(apply.clone()));
    let declare = preview["declare"].as_array().unwrap();
    let names: Vec<&str> = declare
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    for name in [
        q.clone(),
        format!("{q}.dead"),
        format!("{q}.s0"),
        format!("{q}.s0.dead"),
        format!("{q}.s1"),
        format!("{q}.s1.suspect"),
    ] {
        assert!(names.contains(&name.as_str()), "{name} in {names:?}");
    }
    let leader = |name: &str| {
        declare
            .iter()
            .find(|d| d["name"] == name)
            .map(|d| d["arguments"]["x-queue-leader-locator"].clone())
    };
    assert_eq!(leader(&format!("{q}.s1")), Some(json!("\"balanced\"")));
    assert_eq!(leader(&q), Some(Value::Null));
    apply.push("--yes".to_owned());
    ok(&run(apply));

    // What the tool declared is what the backend declares: a backend
    // declaring the same queue is not refused.
    let options = queuey_rabbitmq::RabbitMqOptions::default()
        .connection_name(format!("queuey-ops-test-backend-{q}"));
    let backend = within(
        "backend",
        queuey_rabbitmq::RabbitMqBackend::with_options(&h.url, options),
    )
    .await
    .expect("backend connects");
    let config = QueueConfig::new(&q).queue_type(QueueType::Quorum).shards(2);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .expect("the backend's declare matches the tool's");
    let _ = backend.close().await;

    let mut verify = vec!["topology".to_owned(), "verify".to_owned()];
    verify.extend(with(&["--shards", "2"]));
    let out = ok(&run(verify));
    assert!(
        out.contains("topology ok") && out.contains("over 2 shards"),
        "{out}"
    );

    // Checked as unsharded: its shards are one too many.
    let mut verify = vec!["topology".to_owned(), "verify".to_owned()];
    verify.extend(with(&["--json"]));
    let problems = run(verify);
    assert_eq!(problems.status.code(), Some(3));
    let problems: Value = serde_json::from_slice(&problems.stdout).unwrap();
    let kinds: Vec<(&str, &str)> = problems
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["queue"].as_str().unwrap(), p["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [(format!("{q}.s0").as_str(), "extra_shard")]);

    // Checked with a shard more than it has: that shard is missing.
    let mut verify = vec!["topology".to_owned(), "verify".to_owned()];
    verify.extend(with(&["--shards", "3", "--json"]));
    let problems: Value = serde_json::from_slice(&run(verify).stdout).unwrap();
    let missing: Vec<&str> = problems
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "missing")
        .map(|p| p["queue"].as_str().unwrap())
        .collect();
    assert_eq!(
        missing,
        [
            format!("{q}.s2"),
            format!("{q}.s2.suspect"),
            format!("{q}.s2.dead")
        ]
    );
}

#[tokio::test]
async fn the_dashboard_shows_a_sharded_queue_once_with_a_row_per_shard() {
    let h = harness!("shards_web");
    let q = h.sharded_queue("shards-web", 2);
    let (backend, config) = h.sharded_backend(&q, 2).await;
    let physical = config.physical();
    dead_on(&backend, &physical[0], 1, "lane").await;
    let s1 = dead_on(&backend, &physical[2], 2, "s1").await;
    let dashboard = Dashboard::start(h.web_config()).await;
    let client = http();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{}{path}", dashboard.base);
        async move {
            let response = within("page", client.get(&url).send()).await.unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            assert!(status.is_success(), "{url}: {status}\n{text}");
            text
        }
    };

    let index = get("/".to_owned()).await;
    assert!(index.contains(&format!("href=\"/queue/{q}\"")), "{index}");
    assert!(
        !index.contains(&format!("href=\"/queue/{q}.s0\"")),
        "{index}"
    );
    assert!(index.contains("lane and 2 shards"), "{index}");

    let page = get(format!("/queue/{q}")).await;
    assert!(page.contains("id=\"shards\""), "{page}");
    assert!(page.contains("<b id=\"dead-count\">3</b>"), "{page}");
    assert!(page.contains(&format!("href=\"/queue/{q}.s1\"")), "{page}");
    assert!(page.contains("<td>s1</td>"), "{page}");

    let letter = get(format!("/queue/{q}/dead/{}", s1[0].job_id)).await;
    assert!(letter.contains("<span id=\"shard\">s1</span>"), "{letter}");

    // A shard's own page: just that shard.
    let shard = get(format!("/queue/{q}.s1")).await;
    assert!(shard.contains("<b id=\"dead-count\">2</b>"), "{shard}");
    let _ = backend.close().await;
}
