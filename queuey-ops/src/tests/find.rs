//! `queuey job show` against the real broker: a job found ready, held with
//! its release time, running on a worker, dead with its reason, and not
//! found with what was searched; and the hold census's release times.

use std::time::Duration;

use queuey_core::backend::{Backend, Heartbeats};
use queuey_core::{Envelope, Uuid};

use crate::tests::fleet::{beat, control_backend};
use crate::tests::support::{dead_letter_jobs, harness, json, ok, within};
use crate::tests::web_exposure::{Dashboard, http};
use crate::time::now_ms;

fn envelope(queue: &str, job_type: &str) -> Envelope {
    let raw = serde_json::value::to_raw_value(&serde_json::json!({"n": 1})).unwrap();
    Envelope::new(job_type, queue, raw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_show_finds_a_job_ready_held_or_dead_and_says_what_it_searched() {
    let h = harness!("find-places");
    let q = h.queue("find");
    let (backend, config) = h.backend(&q).await;
    h.track(&format!("{q}.deferred.quorum.60000"));

    let dead = dead_letter_jobs(
        &backend,
        &config,
        &[
            (
                "report".into(),
                "boom: disk full".into(),
                serde_json::json!({}),
            ),
            ("report".into(), "second".into(), serde_json::json!({})),
        ],
    )
    .await;
    let ready = envelope(&q, "mail");
    within("publish", backend.publish(&ready)).await.unwrap();
    let held = envelope(&q, "retry-me");
    let before = now_ms();
    within(
        "hold",
        backend.publish_after(&held, Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let after = now_ms();

    // Ready: only read with --ready; without it the work queue is counted.
    let id = ready.job_id.to_string();
    let unread = h.cli(&["job", "show", &id, "--queue", &q]);
    assert_eq!(unread.status.code(), Some(3), "not found is exit code 3");
    let text = String::from_utf8_lossy(&unread.stdout);
    assert!(text.contains(&format!("job {id} was not found")), "{text}");
    assert!(text.contains("1 job(s), not read (--ready"), "{text}");
    let found = json(&h.cli(&["--json", "job", "show", &id, "--queue", &q, "--ready"]));
    assert_eq!(found["state"], "ready", "{found}");
    assert_eq!(found["queue"], q);
    assert_eq!(found["position"], 1);
    assert_eq!(found["job_type"], "mail");
    let text = ok(&h.cli(&["job", "show", &id, "--queue", &q, "--ready"]));
    assert!(text.contains(&format!("is ready in {q}")), "{text}");

    // Held: its release time is its due-at header, never before the delay.
    let id = held.job_id.to_string();
    let found = json(&h.cli(&["--json", "job", "show", &id, "--queue", &q]));
    assert_eq!(found["state"], "held", "{found}");
    assert_eq!(found["hold"], format!("{q}.deferred.quorum.60000"));
    assert_eq!(found["delay_ms"], 60_000);
    let due = found["due_at_ms"].as_i64().expect("a due time");
    assert!(
        due >= before + 60_000,
        "never early: {due} < {before} + 60 s"
    );
    assert!(due <= after + 65_000, "late by seconds at most: {due}");
    let text = ok(&h.cli(&["job", "show", &id, "--queue", &q]));
    assert!(text.contains("(a 1m00s quorum hold) until 20"), "{text}");
    assert!(text.contains("(in "), "{text}");

    // Dead: with its reason and attempts; what was read is listed.
    let id = dead[0].job_id.to_string();
    let found = json(&h.cli(&["--json", "job", "show", &id, "--queue", &q]));
    assert_eq!(found["state"], "dead", "{found}");
    assert_eq!(found["reason"], "boom: disk full");
    assert_eq!(found["dead_queue"], format!("{q}.dead"));
    assert_eq!(found["position"], 1);
    let text = ok(&h.cli(&["job", "show", &id, "--queue", &q]));
    assert!(text.contains("reason: boom: disk full"), "{text}");
    assert!(
        text.contains(&format!("queuey dead show {q} {id}")),
        "{text}"
    );

    // Not found: every queue searched, with what was read of it.
    let missing = Uuid::new_v4().to_string();
    let out = h.cli(&["--json", "job", "show", &missing, "--queue", &q, "--ready"]);
    assert_eq!(out.status.code(), Some(3));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["state"], "not_found");
    let searched = answer["searched"].as_array().unwrap();
    let of = |role: &str| {
        searched
            .iter()
            .find(|s| s["role"] == role)
            .unwrap_or_else(|| panic!("no {role} in {searched:?}"))
    };
    assert_eq!(
        (of("work")["read"].as_u64(), of("work")["messages"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(of("hold")["read"], 1);
    assert_eq!(of("suspect")["exists"], true);
    assert_eq!(of("dead")["read"], 2);
    assert_eq!(of("dead")["partly_read"], false);
    let out = h.cli(&["job", "show", &missing, "--queue", &q]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("finished leaves no trace"), "{text}");
    assert!(
        text.contains(&format!("{q}.dead (dead-letter queue): read 2 of 2")),
        "{text}"
    );

    // A cap per queue: the second letter is past it, and the output says so.
    let id = dead[1].job_id.to_string();
    let out = h.cli(&[
        "--json",
        "job",
        "show",
        &id,
        "--queue",
        &q,
        "--max-per-queue",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dead_read = answer["searched"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["role"] == "dead")
        .unwrap()
        .clone();
    assert_eq!(dead_read["partly_read"], true, "{dead_read}");
    let text = String::from_utf8_lossy(
        &h.cli(&["job", "show", &id, "--queue", &q, "--max-per-queue", "1"])
            .stdout,
    )
    .into_owned();
    assert!(text.contains("read 1 of 2 (partly read"), "{text}");

    // Nothing was lost or moved by the reads.
    assert_eq!(h.ready(&q).await, 1);
    assert_eq!(h.ready(&format!("{q}.dead")).await, 2);
    assert_eq!(h.ready(&format!("{q}.deferred.quorum.60000")).await, 1);

    let refused = h.cli(&["job", "show", "not-a-uuid"]);
    assert_eq!(refused.status.code(), Some(1));
    backend.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_show_finds_a_job_running_on_a_worker() {
    let h = harness!("find-running");
    let q = h.queue("running");
    let (backend, _) = h.backend(&q).await;
    let worker = control_backend(&h, "worker").await;
    let job = Uuid::new_v4();
    worker
        .heartbeat(&beat(&q, job, Duration::from_secs(12)))
        .await
        .unwrap();

    // Without --queue: the fleet's queues, after the heartbeats.
    let found = json(&h.cli(&["--json", "job", "show", &job.to_string()]));
    assert_eq!(found["state"], "running", "{found}");
    let worker_label = found["worker"].as_str().unwrap();
    assert!(
        worker_label.contains("ops-test-host:4242"),
        "{worker_label}"
    );
    assert_eq!(found["queue"], q);
    assert_eq!(found["attempt"], 2);
    assert_eq!(found["progress"]["percent"], 40);
    let text = ok(&h.cli(&["job", "show", &job.to_string()]));
    assert!(text.contains("is running on worker "), "{text}");
    assert!(
        text.contains(&format!("ops-test-host:4242) (queue {q}")),
        "{text}"
    );
    assert!(text.contains("4 of 10 pages"), "{text}");
    worker.close().await.unwrap();
    backend.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_show_when_a_quorum_holds_jobs_come_back_at_the_latest() {
    let h = harness!("find-holds");
    let q = h.queue("bounds");
    let (backend, config) = h.backend(&q).await;
    h.track(&format!("{q}.deferred.quorum.30000"));
    for _ in 0..3 {
        let env = envelope(config.name(), "later");
        within("hold", backend.publish_after(&env, Duration::from_secs(30)))
            .await
            .unwrap();
    }
    let before = now_ms();
    let census = json(&h.cli(&["--json", "holds", &q]));
    let after = now_ms();
    let hold = &census[0]["holds"][0];
    assert_eq!(hold["kind"], "quorum", "{hold}");
    assert_eq!(hold["jobs"], 3);
    let by = hold["releases_by_ms"].as_i64().expect("a bound");
    assert!(by >= before + 30_000 && by <= after + 30_000, "{by}");
    assert!(
        hold["release_note"]
            .as_str()
            .unwrap()
            .contains("quorum hold is not read"),
        "{hold}"
    );
    let text = ok(&h.cli(&["holds", &q]));
    assert!(!text.contains("read 0 of"), "{text}");
    assert!(text.contains("not read (quorum)"), "{text}");
    assert!(text.contains("by 20") && text.contains("(in "), "{text}");
    assert!(text.contains("job show ID"), "{text}");
    backend.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_finds_a_job_from_the_overviews_search_box() {
    let h = harness!("find-web");
    let q = h.queue("findweb");
    let (backend, config) = h.backend(&q).await;
    let dead = dead_letter_jobs(
        &backend,
        &config,
        &[("report".into(), "<b>boom</b>".into(), serde_json::json!({}))],
    )
    .await;
    let mut web = h.web_config();
    web.queues = vec![q.clone()];
    let dash = Dashboard::start(web).await;
    let get = async |path: String| {
        let answer = within("page", http().get(format!("{}{path}", dash.base)).send())
            .await
            .unwrap();
        (answer.status().as_u16(), answer.text().await.unwrap())
    };

    let (status, index) = get("/".to_owned()).await;
    assert_eq!(status, 200);
    assert!(
        index.contains("<form id=\"job-search\" method=\"get\" action=\"/job\">"),
        "{index}"
    );
    let id = dead[0].job_id;
    let (status, page) = get(format!("/job?id={id}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-state=\"dead\""), "{page}");
    assert!(page.contains("reason: &lt;b&gt;boom&lt;/b&gt;"), "{page}");
    assert!(!page.contains("<b>boom"), "escaped: {page}");
    assert!(page.contains(&format!("/dead/{id}")), "{page}");
    assert!(page.contains("id=\"back\" href=\"/\""), "{page}");

    let missing = Uuid::new_v4();
    let (status, page) = get(format!("/job?id={missing}")).await;
    assert_eq!(status, 200);
    assert!(page.contains("data-state=\"not_found\""), "{page}");
    assert!(page.contains("--ready"), "{page}");
    let (status, _) = get("/job?id=%3Cscript%3E".to_owned()).await;
    assert_eq!(status, 400);
    backend.close().await.unwrap();
}
