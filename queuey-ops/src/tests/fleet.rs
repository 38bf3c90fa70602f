//! Workers, pauses and cancellations from the `queuey` tool and the
//! dashboard's `/metrics`, against a real RabbitMQ. Workers are stood in
//! for by heartbeats sent through the library's own backend.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuey_core::Uuid;
use queuey_core::backend::Heartbeats;
use queuey_core::control::{ControlState, Heartbeat, LimitSeen, Progress, QueueTotals, RunningJob};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::TlsFiles;
use crate::fleet::Fleet;
use crate::tests::support::{Harness, harness, json, ok, within};
use crate::tests::web_exposure::{Dashboard, http};

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A backend on the test's control stream.
pub(crate) async fn control_backend(h: &Harness, label: &str) -> RabbitMqBackend {
    let options = RabbitMqOptions::default()
        .connection_name(format!(
            "queuey-ops-test-{label}-{}",
            Uuid::new_v4().simple()
        ))
        .control_stream(h.control_stream());
    within("backend", RabbitMqBackend::with_options(&h.url, options))
        .await
        .expect("backend connects")
}

/// A worker's heartbeat on `queue`, running one job started `ran` ago.
pub(crate) fn beat(queue: &str, job: Uuid, ran: Duration) -> Heartbeat {
    let now = now_ms();
    Heartbeat {
        worker_id: Uuid::new_v4(),
        host: "ops-test-host".into(),
        name: None,
        pid: 4242,
        version: "0.1.0".into(),
        queues: vec![queue.to_owned()],
        paused: vec![],
        concurrency: 8,
        connection: "connected".into(),
        started_at_ms: now - 3_600_000,
        at_ms: now,
        interval_ms: 60_000 / 3,
        stopping: false,
        running: vec![RunningJob {
            job_id: job,
            job_type: "export".into(),
            queue: queue.to_owned(),
            attempt: 2,
            started_at_ms: now - ran.as_millis() as u64,
            progress: Some(Progress::new(40, "4 of 10 pages")),
            tenant: Some("acme".into()),
        }],
        totals: vec![QueueTotals {
            queue: queue.to_owned(),
            finished: 12,
            ..QueueTotals::default()
        }],
        limits: vec![LimitSeen {
            name: "call_api".into(),
            key: "api.example.com".into(),
            concurrency: Some(3),
            rate: Some("10/s".into()),
            running: 2,
            waiting: 5,
            waits: 17,
        }],
    }
}

pub(crate) async fn state(h: &Harness) -> ControlState {
    let fleet = Fleet::connect_to(
        &h.url,
        &TlsFiles::default(),
        "queuey-ops-test-state",
        &h.control_stream(),
    )
    .await
    .unwrap();
    let state = fleet.state().await.unwrap();
    fleet.close().await;
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_pauses_resumes_and_cancels_only_with_yes() {
    let h = harness!("fleet-cli");
    let q = h.queue("fleet");
    let (backend, _) = h.backend(&q).await;

    let preview = ok(&h.cli(&["queue", "pause", &q]));
    assert!(preview.contains(&format!("would pause `{q}`")), "{preview}");
    assert!(!state(&h).await.is_paused(&q), "a preview changes nothing");
    let done = ok(&h.cli(&["queue", "pause", &q, "--yes"]));
    assert!(done.contains(&format!("paused `{q}`")), "{done}");
    assert!(state(&h).await.is_paused(&q));
    let listed = json(&h.cli(&["--json", "queue", "paused"]));
    assert_eq!(listed[0]["queue"], q);
    let holds = ok(&h.cli(&["holds", &q]));
    assert!(holds.contains("paused since"), "{holds}");
    ok(&h.cli(&["queue", "resume", &q, "--yes"]));
    assert!(!state(&h).await.is_paused(&q));

    let id = Uuid::new_v4();
    let preview = ok(&h.cli(&["job", "cancel", &id.to_string()]));
    assert!(
        preview.contains(&format!("would cancel job {id}")),
        "{preview}"
    );
    assert!(!state(&h).await.is_cancelled_id(id));
    ok(&h.cli(&["job", "cancel", &id.to_string(), "--yes"]));
    assert!(state(&h).await.is_cancelled_id(id));
    ok(&h.cli(&[
        "job",
        "cancel",
        "--type",
        "export",
        "--filter",
        "campaign=42",
        "--yes",
    ]));
    assert_eq!(state(&h).await.cancellations(), (1, 1));

    // Each cancellation can be listed and withdrawn by the id of the
    // command that sent it.
    let listed = json(&h.cli(&["--json", "job", "cancellations"]));
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let by_id = listed
        .iter()
        .find(|c| c["cancels"] == format!("job {id}"))
        .expect("the cancellation by id is listed");
    let command = by_id["command_id"].as_str().unwrap().to_owned();
    let preview = ok(&h.cli(&["job", "revoke", &command]));
    assert!(
        preview.contains(&format!("would withdraw the cancellation of job {id}")),
        "{preview}"
    );
    assert!(
        state(&h).await.is_cancelled_id(id),
        "a preview changes nothing"
    );
    ok(&h.cli(&["job", "revoke", &command, "--yes"]));
    assert!(!state(&h).await.is_cancelled_id(id));
    assert_eq!(state(&h).await.cancellations(), (0, 1));
    let unknown = ok(&h.cli(&["job", "revoke", &command, "--yes"]));
    assert!(unknown.contains("nothing to withdraw"), "{unknown}");

    let refused = h.cli(&["job", "cancel"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("say what to cancel"));
    let refused = h.cli(&["job", "cancel", "not-a-uuid", "--yes"]);
    assert!(!refused.status.success());
    backend.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_their_long_jobs_are_listed_and_served_for_prometheus() {
    let h = harness!("fleet-workers");
    let q = h.queue("busy");
    let (backend, _) = h.backend(&q).await;
    let worker = control_backend(&h, "worker").await;
    let job = Uuid::new_v4();
    worker
        .heartbeat(&beat(&q, job, Duration::from_secs(900)))
        .await
        .unwrap();

    let listed = ok(&h.cli(&["workers", "--long", "10m"]));
    // Named by its backend's connection name, then host and pid.
    assert!(
        listed.contains("queuey-ops-test-worker-") && listed.contains("(ops-test-host:4242)"),
        "{listed}"
    );
    assert!(listed.contains(&job.to_string()), "{listed}");
    assert!(listed.contains("LONG"), "{listed}");
    assert!(listed.contains("40% 4 of 10 pages"), "{listed}");
    // Its tenant, in the job's row and in the count per tenant.
    assert!(listed.contains("TENANT"), "{listed}");
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().eq(["acme", q.as_str(), "1"])),
        "{listed}"
    );
    let quiet = ok(&h.cli(&["workers", "--long", "1h"]));
    assert!(!quiet.contains("LONG"), "{quiet}");
    let as_json = json(&h.cli(&["--json", "workers"]));
    assert_eq!(as_json[0]["running"][0]["job_id"], job.to_string());
    assert_eq!(as_json[0]["running"][0]["progress"]["percent"], 40);
    assert_eq!(as_json[0]["running"][0]["tenant"], "acme");
    // Its process's limits, per key: slots held of the limit, waiting,
    // waits told, the rate.
    assert!(
        listed.lines().any(|l| l.split_whitespace().eq([
            "call_api",
            "api.example.com",
            "2/3",
            "5",
            "17",
            "10/s"
        ])),
        "{listed}"
    );
    assert_eq!(as_json[0]["limits"][0]["key"], "api.example.com");

    let mut config = h.web_config();
    config.queues = vec![q.clone()];
    let dash = Dashboard::start(config).await;
    let metrics = within(
        "metrics",
        http().get(format!("{}/metrics", dash.base)).send(),
    )
    .await
    .unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    for line in [
        format!("queuey_workers{{queue=\"{q}\"}} 1"),
        format!("queuey_jobs_running{{queue=\"{q}\"}} 1"),
        format!("queuey_queue_paused{{queue=\"{q}\"}} 0"),
        format!("queuey_dead_letters{{queue=\"{q}\"}} 0"),
        "# TYPE queuey_fleet_jobs_total counter".to_owned(),
        "# TYPE queuey_hold_jobs gauge".to_owned(),
    ] {
        assert!(text.contains(&line), "missing {line} in:\n{text}");
    }
    let page = within(
        "workers page",
        http().get(format!("{}/workers", dash.base)).send(),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(page.contains("ops-test-host:4242"), "{page}");
    assert!(page.contains("class=\"long\""), "{page}");
    assert!(
        page.contains("<progress max=\"100\" value=\"40\">"),
        "{page}"
    );
    assert!(page.contains("40% 4 of 10 pages"), "{page}");
    assert!(page.contains("id=\"tenants\""), "{page}");
    assert!(page.contains("id=\"limits\""), "{page}");
    assert!(page.contains("api.example.com"), "{page}");

    // Its last heartbeat takes it off the list at once.
    let mut last = beat(&q, job, Duration::from_secs(901));
    last.worker_id = as_json[0]["worker_id"].as_str().unwrap().parse().unwrap();
    last.stopping = true;
    worker.heartbeat(&last).await.unwrap();
    let gone = ok(&h.cli(&["workers"]));
    assert!(gone.contains("no worker"), "{gone}");
    worker.close().await.unwrap();
    backend.close().await.unwrap();
}

/// Workers the tool cannot hear (another control stream, a user it does
/// not trust) consume the queue: a pause would reach nobody who consumes
/// it, so it is refused unless forced, with the causes named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_no_heard_worker_would_read_is_refused_unless_forced() {
    let h = harness!("fleet-unheard");
    let q = h.queue("unheard");
    let (backend, _) = h.backend(&q).await;
    // A consumer of the queue that sends no heartbeat on the tool's stream.
    let channel = h.amqp.channel().await.expect("channel");
    let _consumer = channel
        .basic_consume(
            q.as_str().into(),
            "queuey-ops-test-unheard".into(),
            lapin::options::BasicConsumeOptions::default(),
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("consume");

    let refused = h.cli(&["queue", "pause", &q, "--yes"]);
    assert!(
        !refused.status.success(),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("1 consumer(s)"), "{stderr}");
    assert!(stderr.contains("--worker-user"), "{stderr}");
    assert!(!state(&h).await.is_paused(&q), "nothing was sent");

    ok(&h.cli(&["queue", "pause", &q, "--yes", "--force"]));
    assert!(state(&h).await.is_paused(&q));
    // Paused already: sent again only when forced.
    let again = ok(&h.cli(&["queue", "pause", &q, "--yes", "--force"]));
    assert!(again.contains(&format!("paused `{q}`")), "{again}");
    ok(&h.cli(&["queue", "resume", &q, "--yes", "--force"]));
    assert!(!state(&h).await.is_paused(&q));
    let _ = channel.close(200, "done".into()).await;
    backend.close().await.unwrap();
}
