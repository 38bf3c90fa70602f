//! `queuey dead …` against the real broker.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lapin::BasicProperties;
use serde_json::{Value, json};

use crate::dead;
use crate::tests::support::{
    Harness, Made, dead_letter_jobs, fingerprint_counts, harness, json, ok, process_all,
    queuey_bin, within,
};

const TYPES: [&str; 3] = ["send_email", "charge_invoice", "make_thumbnail"];

/// Job `i` of a mixed batch: a type and a reason from one of five families.
fn job(i: usize) -> (String, String, Value) {
    let reason = match i % 5 {
        0 => format!("HTTP 503 from upstream after {} ms", 100 + i),
        1 => format!("order {} not found", 1000 + i),
        2 => format!("card '{}' declined", uuid::Uuid::new_v4().simple()),
        3 => "timeout".to_owned(),
        _ => format!("user {} is locked", uuid::Uuid::new_v4()),
    };
    (TYPES[i % 3].to_owned(), reason, json!({ "n": i }))
}

const FINGERPRINTS: [&str; 5] = [
    "HTTP <n> from upstream after <n> ms",
    "order <n> not found",
    "card <s> declined",
    "timeout",
    "user <id> is locked",
];

fn ids(made: &[Made]) -> Vec<String> {
    made.iter().map(|m| m.job_id.to_string()).collect()
}

#[tokio::test]
async fn fifty_dead_letters_are_listed_grouped_and_shown_exactly() {
    let h = harness!("dead_ls_stats_show");
    let q = h.queue("dead-ls");
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..50).map(job).collect();
    let made = dead_letter_jobs(&backend, &config, &jobs).await;
    assert_eq!(h.ready(&format!("{q}.dead")).await, 50);

    // ls: every dead letter, oldest first, exactly as made.
    let listed = json(&h.cli(&["dead", "ls", &q, "--limit", "100", "--json"]));
    assert_eq!(listed["total"], 50);
    let items = listed["items"].as_array().unwrap();
    let listed_ids: Vec<String> = items
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed_ids, ids(&made));
    for (item, m) in items.iter().zip(&made) {
        assert_eq!(item["reason"], m.reason.as_str());
        assert_eq!(item["job_type"], m.job_type.as_str());
        assert_eq!(item["original_queue"], q.as_str());
        assert_eq!(item["attempts"], 1);
    }
    // Reading changed nothing, not even the order.
    assert_eq!(h.ready(&format!("{q}.dead")).await, 50);
    let again = json(&h.cli(&["dead", "ls", &q, "--limit", "100", "--json"]));
    assert_eq!(again["items"], listed["items"]);

    // Paging, newest first, and a type filter.
    let page = json(&h.cli(&[
        "dead", "ls", &q, "--newest", "--limit", "5", "--offset", "5", "--json",
    ]));
    let page_ids: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = made
        .iter()
        .rev()
        .skip(5)
        .take(5)
        .map(|m| m.job_id.to_string())
        .collect();
    assert_eq!(page_ids, expected);
    let emails = json(&h.cli(&[
        "dead",
        "ls",
        &q,
        "--type",
        "send_email",
        "--limit",
        "100",
        "--json",
    ]));
    assert_eq!(emails["matching"], 17);
    let text = ok(&h.cli(&["dead", "ls", &q, "--limit", "3"]));
    assert!(text.contains("showing 3 of 50 matching"), "{text}");
    assert!(text.contains(&made[0].job_id.to_string()), "{text}");

    // stats: five fingerprints of ten each; job types 17/17/16.
    let stats = json(&h.cli(&["dead", "stats", &q, "--json"]));
    assert_eq!(stats["total"], 50);
    assert_eq!(stats["malformed"], 0);
    let groups = fingerprint_counts(&stats);
    let expected: BTreeMap<String, u64> =
        FINGERPRINTS.iter().map(|f| ((*f).to_owned(), 10)).collect();
    assert_eq!(groups, expected);
    let types: BTreeMap<String, u64> = stats["by_job_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["job_type"].as_str().unwrap().to_owned(),
                t["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        types,
        BTreeMap::from([
            ("charge_invoice".to_owned(), 17),
            ("make_thumbnail".to_owned(), 16),
            ("send_email".to_owned(), 17),
        ])
    );
    let text = ok(&h.cli(&["dead", "stats", &q]));
    assert!(text.contains("order <n> not found"), "{text}");

    // show: by job id and by position.
    let m = &made[7];
    let shown = json(&h.cli(&["dead", "show", &q, &m.job_id.to_string(), "--json"]));
    assert_eq!(shown["summary"]["position"], 8);
    assert_eq!(shown["headers"]["x-death-reason"], m.reason.as_str());
    assert_eq!(shown["headers"]["x-original-queue"], q.as_str());
    assert_eq!(shown["envelope"]["job_type"], m.job_type.as_str());
    assert_eq!(shown["payload"], json!({ "n": 7 }));
    let by_position = json(&h.cli(&["dead", "show", &q, "#8", "--json"]));
    assert_eq!(by_position["summary"]["id"], m.job_id.to_string());
    let text = ok(&h.cli(&["dead", "show", &q, &m.job_id.to_string()]));
    assert!(text.contains("\"n\": 7"), "{text}");

    assert_eq!(h.ready(&format!("{q}.dead")).await, 50);
    backend.close().await.unwrap();
}

#[tokio::test]
async fn redrive_previews_by_default_then_moves_jobs_back_to_a_worker() {
    let h = harness!("dead_redrive");
    let q = h.queue("dead-redrive");
    let dq = format!("{q}.dead");
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..20).map(job).collect();
    let made = dead_letter_jobs(&backend, &config, &jobs).await;

    // Preview: says what it would move, moves nothing.
    let out = ok(&h.cli(&["dead", "redrive", &q]));
    assert!(out.contains("would move 20 of 20"), "{out}");
    assert!(out.contains("nothing was changed"), "{out}");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (20, 0));

    // A canary of 2 invoices, then the other invoices, then the rest.
    let out = ok(&h.cli(&[
        "dead",
        "redrive",
        &q,
        "--type",
        "charge_invoice",
        "--canary",
        "2",
        "--yes",
    ]));
    assert!(out.contains("canary: moved 2"), "{out}");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (18, 2));
    let report = json(&h.cli(&[
        "dead",
        "redrive",
        &q,
        "--type",
        "charge_invoice",
        "--yes",
        "--json",
    ]));
    assert_eq!(report["moved"], 5);
    assert_eq!(report["not_matching"], 13);
    let out = ok(&h.cli(&["dead", "redrive", &q, "--yes", "--rate", "200"]));
    assert!(out.contains("moved 13 dead letters"), "{out}");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (0, 20));

    // A worker gets every job once, as a first attempt again.
    let processed = process_all(&backend, &config, 20).await;
    let got: BTreeSet<String> = processed.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(processed.len(), 20, "no duplicates");
    assert_eq!(got, ids(&made).into_iter().collect());
    assert!(processed.iter().all(|(_, attempt)| *attempt == 1));
    backend.close().await.unwrap();
}

/// Starts `queuey dead redrive QUEUE --yes --rate RATE` and returns once at
/// least `moved` jobs are back on the queue.
async fn redrive_in_background(
    h: &Harness,
    q: &str,
    rate: &str,
    moved: u32,
) -> std::process::Child {
    let child = std::process::Command::new(queuey_bin())
        .args([
            "dead",
            "redrive",
            q,
            "--yes",
            "--rate",
            rate,
            "--no-progress",
        ])
        .env("AMQP_URL", &h.url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("queuey runs");
    within("some moves", async {
        while h.ready(q).await < moved {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    child
}

#[tokio::test]
async fn an_interrupted_redrive_resumed_moves_every_job_exactly_once() {
    let h = harness!("dead_redrive_resume");
    let q = h.queue("dead-resume");
    let dq = format!("{q}.dead");
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..50).map(job).collect();
    let made = dead_letter_jobs(&backend, &config, &jobs).await;

    let mut child = redrive_in_background(&h, &q, "40", 10).await;
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    // The broker requeues what the dead process held; nothing is in both
    // queues or in neither.
    within("requeued", async {
        while h.ready(&dq).await + h.ready(&q).await != 50 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let moved_before = h.ready(&q).await;
    assert!((10..50).contains(&moved_before), "{moved_before}");

    let out = ok(&h.cli(&["dead", "redrive", &q, "--yes"]));
    assert!(
        out.contains(&format!("moved {} dead letters", 50 - moved_before)),
        "{out}"
    );
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (0, 50));
    let processed = process_all(&backend, &config, 50).await;
    assert_eq!(processed.len(), 50, "no duplicates");
    let got: BTreeSet<String> = processed.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(got, ids(&made).into_iter().collect());
    backend.close().await.unwrap();
}

fn snapshot(letters: &[dead::DeadLetter]) -> Vec<(Vec<u8>, BasicProperties)> {
    letters
        .iter()
        .map(|l| (l.body.clone(), l.properties.clone()))
        .collect()
}

#[tokio::test]
async fn purge_writes_a_complete_export_first_and_import_restores_it() {
    let h = harness!("dead_purge_import");
    let q = h.queue("dead-purge");
    let dq = format!("{q}.dead");
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..12).map(job).collect();
    dead_letter_jobs(&backend, &config, &jobs).await;
    let before = crate::tests::helpers::read_dead(&h.amqp, &dq, 1_000)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dead.jsonl");
    let file_arg = file.to_str().unwrap();

    // Preview: no file, nothing removed.
    let out = ok(&h.cli(&["dead", "purge", &q, "--export", file_arg]));
    assert!(out.contains("would export 12 of 12"), "{out}");
    assert!(!file.exists());
    assert_eq!(h.ready(&dq).await, 12);

    let out = ok(&h.cli(&["dead", "purge", &q, "--export", file_arg, "--yes"]));
    assert!(out.contains("exported 12 dead letters"), "{out}");
    assert_eq!(h.ready(&dq).await, 0);
    let records = dead::read_export(&file).unwrap();
    assert_eq!(records.len(), 12);
    for (record, letter) in records.iter().zip(&before) {
        assert_eq!(record.body().unwrap(), letter.body);
        assert_eq!(record.properties, letter.properties);
    }
    // An export never overwrites a file.
    let again = h.cli(&["dead", "purge", &q, "--export", file_arg, "--yes"]);
    assert!(!again.status.success());

    let out = ok(&h.cli(&["dead", "import", file_arg]));
    assert!(out.contains("would publish 12"), "{out}");
    assert_eq!(h.ready(&dq).await, 0);
    let out = ok(&h.cli(&["dead", "import", file_arg, "--yes"]));
    assert!(out.contains("imported 12"), "{out}");
    let after = crate::tests::helpers::read_dead(&h.amqp, &dq, 1_000)
        .await
        .unwrap();
    assert_eq!(
        snapshot(&after),
        snapshot(&before),
        "bodies and properties, in order"
    );

    // A filtered purge removes only what matches.
    let file2 = dir.path().join("emails.jsonl");
    let out = ok(&h.cli(&[
        "dead",
        "purge",
        &q,
        "--type",
        "send_email",
        "--export",
        file2.to_str().unwrap(),
        "--yes",
    ]));
    assert!(out.contains("exported 4 dead letters"), "{out}");
    assert_eq!(h.ready(&dq).await, 8);
    backend.close().await.unwrap();
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_nothing_moves() {
    let h = harness!("dead_bad_input");
    let q = h.queue("dead-bad");
    let dq = format!("{q}.dead");
    let (backend, config) = h.backend(&q).await;

    // An unknown queue.
    let missing = format!("queuey-ops-test.missing.{}", uuid::Uuid::new_v4().simple());
    for args in [
        vec!["dead", "ls", missing.as_str()],
        vec!["dead", "redrive", missing.as_str(), "--yes"],
    ] {
        let out = h.cli(&args);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("does not exist"), "{err}");
    }

    // A body that is not an envelope is dead-lettered verbatim by the
    // backend; a redrive leaves it and says why.
    h.publish_raw(&q, b"{not json", BasicProperties::default())
        .await;
    dead_letter_jobs(&backend, &config, &[job(1)]).await;
    within("both dead", async {
        while h.ready(&dq).await != 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let stats = json(&h.cli(&["dead", "stats", &q, "--json"]));
    assert_eq!(stats["malformed"], 1);
    let shown = json(&h.cli(&["dead", "show", &q, "#1", "--json"]));
    assert_eq!(shown["summary"]["reason"], dead::MALFORMED_REASON);
    let unknown = h.cli(&["dead", "show", &q, "no-such-id"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no dead letter `no-such-id`"));
    assert_eq!(shown["payload"], "{not json");
    let out = ok(&h.cli(&["dead", "redrive", &q, "--yes"]));
    assert!(out.contains("moved 1 dead letters"), "{out}");
    assert!(out.contains("not a queuey envelope"), "{out}");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (1, 1));

    // Import files that are truncated, not JSON, or cut at a line end.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    ok(&h.cli(&[
        "dead",
        "purge",
        &q,
        "--export",
        good.to_str().unwrap(),
        "--yes",
    ]));
    let text = std::fs::read_to_string(&good).unwrap();
    let first_line_end = text.find('\n').unwrap() + 1;
    let cases = [
        (
            "truncated.jsonl",
            text[..text.len() / 2].to_owned(),
            "line 1",
        ),
        ("notjson.jsonl", "hello\n".to_owned(), "not JSON"),
        (
            "cut.jsonl",
            text[..first_line_end].to_owned(),
            "no end-of-export trailer",
        ),
    ];
    for (name, content, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let out = h.cli(&["dead", "import", path.to_str().unwrap(), "--yes"]);
        assert!(!out.status.success(), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(expected) && err.contains("nothing was imported"),
            "{name}: {err}"
        );
    }
    assert_eq!(h.ready(&dq).await, 0, "nothing imported");

    // Importing into a queue that does not exist publishes nothing.
    let out = h.cli(&[
        "dead",
        "import",
        good.to_str().unwrap(),
        "--to",
        &missing,
        "--yes",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    ok(&h.cli(&["dead", "import", good.to_str().unwrap(), "--yes"]));
    assert_eq!(h.ready(&dq).await, 1);
    backend.close().await.unwrap();
}

#[tokio::test]
async fn ctrl_c_stops_a_redrive_cleanly_and_reports_what_moved() {
    let h = harness!("dead_redrive_sigint");
    let q = h.queue("dead-sigint");
    let dq = format!("{q}.dead");
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..40).map(job).collect();
    dead_letter_jobs(&backend, &config, &jobs).await;

    let child = redrive_in_background(&h, &q, "20", 5).await;
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    let out = child.wait_with_output().expect("queuey exits");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    let moved = h.ready(&q).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("moved {moved} dead letters")),
        "{stdout}"
    );
    assert!(moved < 40, "{moved}");
    assert_eq!(h.ready(&dq).await, 40 - moved);
    backend.close().await.unwrap();
}
