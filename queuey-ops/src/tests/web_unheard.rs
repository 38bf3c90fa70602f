//! The dashboard, like the tool, does not silently send a pause that no
//! worker it hears would read: when RabbitMQ shows consumers of a queue and
//! no heartbeat on its control stream names one, the queue page warns and
//! a pause or resume needs a second, explicit confirmation.

use std::time::Duration;

use queuey_core::Uuid;
use queuey_core::backend::Heartbeats;
use reqwest::StatusCode;
use reqwest::header;

use crate::tests::fleet::{beat, control_backend, state};
use crate::tests::support::{harness, within};
use crate::tests::web_exposure::{Dashboard, PageSession, http, page_session};

async fn get(dash: &Dashboard, session: &PageSession, path: &str) -> String {
    within(
        "page",
        http()
            .get(format!("{}{path}", dash.base))
            .header(header::COOKIE, &session.cookie)
            .send(),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap()
}

async fn post(
    dash: &Dashboard,
    session: &PageSession,
    path: &str,
    fields: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut form = vec![("csrf", session.csrf.as_str())];
    form.extend_from_slice(fields);
    let response = within(
        "post",
        http()
            .post(format!("{}{path}", dash.base))
            .header(header::COOKIE, &session.cookie)
            .form(&form)
            .send(),
    )
    .await
    .unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_warns_of_consumers_it_does_not_hear_and_pauses_only_when_forced() {
    let h = harness!("web_unheard");
    let q = h.queue("unheard");
    let (backend, _) = h.backend(&q).await;
    // A consumer of the queue that sends no heartbeat on the dashboard's
    // control stream.
    let channel = h.amqp.channel().await.expect("channel");
    let _consumer = channel
        .basic_consume(
            q.as_str().into(),
            "queuey-ops-test-web-unheard".into(),
            lapin::options::BasicConsumeOptions::default(),
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("consume");

    let dash = Dashboard::start(h.web_config()).await;
    let path = format!("/queue/{q}");
    let session = page_session(&http(), &format!("{}{path}", dash.base)).await;
    let page = get(&dash, &session, &path).await;
    assert!(page.contains("id=\"unheard\""), "{page}");
    assert!(page.contains("1 consumer(s)"), "{page}");

    // A confirmed pause is not sent: the preview comes back with the
    // warning and a button that forces it.
    let pause = format!("/queue/{q}/pause");
    let (status, preview) = post(&dash, &session, &pause, &[("confirm", "yes")]).await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert!(preview.contains("id=\"unheard\""), "{preview}");
    assert!(preview.contains("Pause anyway"), "{preview}");
    assert!(!state(&h).await.is_paused(&q), "nothing was sent");

    let (status, done) = post(
        &dash,
        &session,
        &pause,
        &[("confirm", "yes"), ("force", "yes")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert!(done.contains("id=\"result\""), "{done}");
    assert!(state(&h).await.is_paused(&q));

    // A worker the dashboard hears consumes it: no warning, and a resume
    // needs no force.
    let worker = control_backend(&h, "web-unheard-worker").await;
    worker
        .heartbeat(&beat(&q, Uuid::new_v4(), Duration::from_secs(1)))
        .await
        .unwrap();
    let page = get(&dash, &session, &path).await;
    assert!(!page.contains("id=\"unheard\""), "{page}");
    let (status, done) = post(
        &dash,
        &session,
        &format!("/queue/{q}/resume"),
        &[("confirm", "yes")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert!(done.contains("id=\"result\""), "{done}");
    assert!(!state(&h).await.is_paused(&q));

    let _ = channel.close(200, "done".into()).await;
    worker.close().await.ok();
    backend.close().await.unwrap();
}
