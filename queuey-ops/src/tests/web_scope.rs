//! A dashboard started with `--queue` acts on those queues only: it
//! cancels only the jobs it sees running on them and lists only their
//! schedules.

use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable};
use queuey_core::Uuid;
use queuey_core::backend::Heartbeats;
use reqwest::StatusCode;
use reqwest::header;

use crate::TlsFiles;
use crate::fleet::Fleet;
use crate::tests::support::{Harness, harness, within};
use crate::tests::web_exposure::{Dashboard, PageSession, http, page_session};

/// POSTs a confirmed cancel of `job` with a valid session and CSRF token.
async fn cancel(dash: &Dashboard, session: &PageSession, job: Uuid) -> (StatusCode, String) {
    let id = job.to_string();
    let response = within(
        "cancel",
        http()
            .post(format!("{}/job/cancel", dash.base))
            .header(header::COOKIE, &session.cookie)
            .form(&[
                ("csrf", session.csrf.as_str()),
                ("job_id", id.as_str()),
                ("confirm", "yes"),
            ])
            .send(),
    )
    .await
    .unwrap();
    (response.status(), response.text().await.unwrap())
}

/// Declares `{queue}.periodic.{name}` as a schedule queue (single active
/// consumer), tracked for deletion; returns its name.
pub(crate) async fn schedule_queue(h: &Harness, queue: &str, name: &str) -> String {
    let schedule = format!("{queue}.periodic.{name}");
    h.track(&schedule);
    let ch = h.amqp.channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert("x-single-active-consumer".into(), AMQPValue::Boolean(true));
    ch.queue_declare(
        schedule.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await
    .expect("schedule queue declared");
    let _ = ch.close(200, "".into()).await;
    schedule
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_dashboard_cancels_and_lists_only_its_own_queues() {
    let h = harness!("web_scope");
    let inside_queue = h.queue("scoped");
    let outside_queue = h.queue("outside");
    let (backend, _) = h.backend(&inside_queue).await;
    let (inside, outside, nowhere) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let worker = crate::tests::fleet::control_backend(&h, "scoped-worker").await;
    // One worker runs a job of each queue.
    let mut beat = crate::tests::fleet::beat(&inside_queue, inside, Duration::from_secs(5));
    let mut other = beat.running[0].clone();
    other.job_id = outside;
    other.queue = outside_queue.clone();
    beat.queues.push(outside_queue.clone());
    beat.running.push(other);
    worker.heartbeat(&beat).await.unwrap();
    schedule_queue(&h, &inside_queue, "nightly").await;
    let theirs = schedule_queue(&h, &outside_queue, "nightly").await;

    let mut config = h.web_config();
    config.queues = vec![inside_queue.clone()];
    let dash = Dashboard::start(config).await;
    let session = page_session(&http(), &format!("{}/queue/{inside_queue}", dash.base)).await;

    // A job running on another queue, or one it cannot place: refused.
    for job in [outside, nowhere] {
        let (status, body) = cancel(&dash, &session, job).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{job}: {body}");
        assert!(body.contains("--queue"), "{body}");
    }
    // The preview of the workers page does not offer it either.
    let workers = within(
        "workers page",
        http()
            .get(format!("{}/workers", dash.base))
            .header(header::COOKIE, &session.cookie)
            .send(),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(workers.contains(&inside.to_string()), "{workers}");
    assert!(!workers.contains(&outside.to_string()), "{workers}");
    // A job of its own queue: cancelled.
    let (status, body) = cancel(&dash, &session, inside).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let fleet = Fleet::connect_to(
        &h.url,
        &TlsFiles::default(),
        "queuey-ops-test-web-scope-state",
        &h.control_stream(),
    )
    .await
    .unwrap();
    let state = fleet.state().await.unwrap();
    fleet.close().await;
    assert!(state.is_cancelled_id(inside));
    assert!(!state.is_cancelled_id(outside));
    assert!(!state.is_cancelled_id(nowhere));

    let schedules = within(
        "schedules page",
        http().get(format!("{}/schedules", dash.base)).send(),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(schedules.contains(&inside_queue), "{schedules}");
    assert!(
        !schedules.contains(&outside_queue),
        "{theirs} is listed: {schedules}"
    );
    worker.close().await.unwrap();
    backend.close().await.unwrap();
}
