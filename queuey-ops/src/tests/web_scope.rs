//! A dashboard started with `--queue` acts on those queues only: it
//! cancels only the jobs it sees running on them and lists only their
//! schedules. Without `--queue`, its overview lists the fleet's queues
//! (those its workers' heartbeats name) and says so, while every queue with
//! a dead-letter queue stays reachable.

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

/// The body of `path` on `dash` (status 200 required).
async fn page(dash: &Dashboard, path: &str) -> String {
    let response = within(path, http().get(format!("{}{path}", dash.base)).send())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.text().await.unwrap()
}

/// The overview of `dash` at `path` once `ready` holds for it: the
/// management API may list a queue just declared a moment late.
async fn overview_when(dash: &Dashboard, path: &str, ready: impl Fn(&str) -> bool) -> String {
    within("the overview lists the queues", async {
        loop {
            let body = page(dash, path).await;
            if ready(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
}

/// The inner HTML of the element with `id` in `html` (one that holds no
/// element of its own kind).
pub(crate) fn element<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html
        .find(&format!(" id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}: {html}"));
    let tag_start = html[..at].rfind('<').expect("an opening tag") + 1;
    let tag = html[tag_start..].split([' ', '>']).next().unwrap();
    let start = at + html[at..].find('>').expect("a whole tag") + 1;
    let end = html[start..]
        .find(&format!("</{tag}>"))
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_lists_the_fleets_queues_and_says_which_rule_chose_them() {
    let h = harness!("web_overview");
    let ours = h.queue("overview-ours");
    let theirs = h.queue("overview-theirs");
    let sharded = h.sharded_queue("overview-sharded", 2);
    let (ours_backend, _) = h.backend(&ours).await;
    let (theirs_backend, _) = h.backend(&theirs).await;
    let (sharded_backend, _) = h.sharded_backend(&sharded, 2).await;
    let no_dead = format!("queuey-ops-test.no-dead.{}", Uuid::new_v4().simple());
    let dash = Dashboard::start(h.web_config()).await;
    let both = |body: &str| body.contains(&ours) && body.contains(&theirs);

    // No worker heard from yet: every queue with a dead-letter queue, and
    // the page says why.
    let index = overview_when(&dash, "/", both).await;
    let why = element(&index, "chosen-by");
    assert!(why.contains("No worker has sent a heartbeat"), "{why}");
    assert!(why.contains(&h.control_stream()), "{why}");

    // A worker of the fleet consumes ours, the sharded queue's shards and
    // a queue without a dead-letter queue: the overview lists ours and the
    // sharded queue (once), not theirs, and names the one it leaves out.
    let worker = crate::tests::fleet::control_backend(&h, "overview-worker").await;
    let mut beat = crate::tests::fleet::beat(&ours, Uuid::new_v4(), Duration::from_secs(1));
    beat.queues.extend([
        format!("{sharded}.s0"),
        format!("{sharded}.s1"),
        no_dead.clone(),
    ]);
    worker.heartbeat(&beat).await.unwrap();
    let index = overview_when(&dash, "/", |body| !body.contains(&theirs)).await;
    let listed = element(&index, "queues");
    assert!(
        listed.contains(&format!("href=\"/queue/{ours}\"")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("href=\"/queue/{sharded}\"")),
        "{listed}"
    );
    assert!(!listed.contains(&format!("{sharded}.s0")), "{listed}");
    assert!(listed.contains("lane and 2 shards"), "{listed}");
    let why = element(&index, "chosen-by");
    assert!(why.contains("1 worker(s) report consuming"), "{why}");
    assert!(why.contains("href=\"/?all=true\""), "{why}");
    assert!(element(&index, "unlisted").contains(&no_dead), "{index}");

    // Asked for every queue: theirs again, with the way back.
    let all = overview_when(&dash, "/?all=true", both).await;
    let why = element(&all, "chosen-by");
    assert!(
        why.contains("as asked") && why.contains("id=\"show-fleet\""),
        "{why}"
    );
    // Listing less opens nothing less, and nothing more: theirs' page is
    // reachable as before, its dead-letter queue's not.
    page(&dash, &format!("/queue/{theirs}")).await;
    let dead = http()
        .get(format!("{}/queue/{theirs}.dead", dash.base))
        .send()
        .await
        .unwrap();
    assert_eq!(dead.status(), StatusCode::NOT_FOUND);

    // With --queue: the allow-list, whatever the workers consume or the
    // page asks for.
    let mut config = h.web_config();
    config.queues = vec![theirs.clone()];
    let scoped = Dashboard::start(config).await;
    for path in ["/", "/?all=true"] {
        let index = page(&scoped, path).await;
        assert!(index.contains(&theirs), "{path}: {index}");
        assert!(
            !index.contains(&ours) && !index.contains(&sharded),
            "{path}: {index}"
        );
        assert!(
            element(&index, "chosen-by").contains("--queue"),
            "{path}: {index}"
        );
    }

    worker.close().await.unwrap();
    for backend in [ours_backend, theirs_backend, sharded_backend] {
        backend.close().await.unwrap();
    }
}
