//! The dashboard in a real headless Chromium, driven over WebDriver, its
//! authentication, and how its pages lead back and style their buttons.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::tests::support::{dead_letter_jobs, harness, target_dir, within};
use crate::tests::web_exposure::{Dashboard, PageSession, http, page_session};
use crate::tests::web_scope::element as inner_html;
use crate::web;

/// A chromedriver process, killed on drop with the browsers it started
/// (they share its process group), even when the test fails first.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    /// Starts chromedriver, or returns `None` (after a notice) when it is
    /// not installed and the broker tests are not required.
    async fn start() -> Option<Driver> {
        let port = queuey_core::__private::free_local_port().ok()?;
        let mut command = Command::new("chromedriver");
        command
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = match command.spawn() {
            Ok(child) => child,
            Err(e) if std::env::var("QUEUEY_REQUIRE_BROKER").as_deref() == Ok("1") => {
                panic!("chromedriver cannot start ({e}); install chromium and chromium-driver")
            }
            Err(e) => {
                eprintln!("skipping the dashboard browser test: chromedriver cannot start ({e})");
                return None;
            }
        };
        let driver = Driver { child, port };
        within("chromedriver listens", async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        Some(driver)
    }

    async fn client(&self) -> Client {
        let caps = json!({
            "goog:chromeOptions": {
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"]
            }
        });
        let serde_json::Value::Object(caps) = caps else {
            unreachable!()
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        within(
            "browser session",
            ClientBuilder::new(connector)
                .capabilities(caps)
                .connect(&format!("http://127.0.0.1:{}", self.port)),
        )
        .await
        .expect("a headless Chromium session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        #[cfg(unix)]
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the element `css` names, waiting for the page that has it
/// (a click's navigation may still be under way).
async fn text(client: &Client, css: &str) -> String {
    within(css, async {
        loop {
            if let Ok(element) = client.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
            {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// The element `css` names, waiting for the page that has it.
async fn element(client: &Client, css: &str) -> Element {
    within(css, async {
        loop {
            if let Ok(element) = client.find(Locator::Css(css)).await {
                return element;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Clicks the element `css` names, waiting for the page that has it. The
/// click itself is never repeated: it may submit a form.
async fn click(client: &Client, css: &str) {
    element(client, css)
        .await
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Saves a screenshot under target/ as a test artifact.
async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    let path = target_dir().join(name);
    std::fs::write(&path, png).expect("screenshot written");
    eprintln!("screenshot: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_dead_letters_and_redrives_them_after_a_preview() {
    let h = harness!("dashboard");
    let Some(driver) = Driver::start().await else {
        return;
    };
    let q = h.queue("web");
    let dq = format!("{q}.dead");
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..6)
        .map(|i| {
            let reason = if i % 2 == 0 {
                format!("HTTP 503 from payments after {} ms", 200 + i)
            } else {
                format!("invoice {} not found", 9000 + i)
            };
            (
                ["send_email", "charge_invoice"][i % 2].to_owned(),
                reason,
                json!({ "n": i }),
            )
        })
        .collect();
    let made = dead_letter_jobs(&backend, &config, &jobs).await;

    let exports = tempfile::tempdir().unwrap();
    let mut web_config = h.web_config();
    web_config.queues = vec![q.clone()];
    web_config.export_dir = exports.path().to_owned();
    let dash = Dashboard::start(web_config).await;
    let base = dash.base.clone();
    let framing = FramingPage::start(&format!("{base}/queue/{q}")).await;

    // A POST without the page's CSRF token is refused and moves nothing.
    let forged = reqwest::Client::new()
        .post(format!("{base}/queue/{q}/redrive"))
        .form(&[("confirm", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (6, 0));

    let client = driver.client().await;
    within("index", client.goto(&format!("{base}/")))
        .await
        .unwrap();
    assert!(text(&client, "#queues").await.contains(&q));
    // The Content-Security-Policy lets the page's own style sheet apply.
    let header_colour = client
        .execute(
            "return getComputedStyle(document.querySelector('header')).backgroundColor",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(header_colour, json!("rgb(29, 36, 48)"));
    click(&client, &format!("a[href=\"/queue/{q}\"]")).await;
    assert_eq!(text(&client, "#dead-count").await, "6");
    let groups = text(&client, "#groups").await;
    assert!(
        groups.contains("HTTP <n> from payments after <n> ms"),
        "{groups}"
    );
    assert!(groups.contains("invoice <n> not found"), "{groups}");
    let listed = text(&client, "#dead").await;
    for m in &made {
        assert!(listed.contains(&m.job_id.to_string()), "{listed}");
    }
    // Pausing loses nothing: a neutral button, not the purge's red one.
    let colours = client
        .execute(
            "return ['pause', 'purge-all', 'redrive-all'].map(id => { \
               const b = document.getElementById(id); \
               return [b.className, getComputedStyle(b).color, getComputedStyle(b).borderColor]; })",
            vec![],
        )
        .await
        .unwrap();
    let (pause, purge, redrive) = (&colours[0], &colours[1], &colours[2]);
    assert_eq!(pause[0], json!("neutral"), "{colours}");
    assert_eq!(purge[0], json!("danger"), "{colours}");
    assert_eq!(purge[1], json!("rgb(179, 38, 30)"), "{colours}");
    assert_eq!(pause[1], json!("rgb(29, 36, 48)"), "{colours}");
    assert_ne!(pause[2], purge[2], "{colours}");
    assert_eq!(
        (&pause[1], &pause[2]),
        (&redrive[1], &redrive[2]),
        "{colours}"
    );
    screenshot(&client, "queuey-dashboard-queue.png").await;

    // Preview: says what would move; nothing moves.
    click(&client, "#redrive-all").await;
    assert_eq!(text(&client, "#would-move").await, "would move 6 of 6");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (6, 0));
    screenshot(&client, "queuey-dashboard-preview.png").await;

    // Confirm: every dead letter is back on its queue.
    click(&client, "#confirm").await;
    assert!(
        text(&client, "#result")
            .await
            .starts_with("Moved 6 dead letters back")
    );
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (0, 6));
    click(&client, "#back").await;
    assert!(text(&client, "#no-dead").await.contains("No dead letters"));
    click(&client, "#back-to-queues").await;
    assert!(text(&client, "#queues").await.contains(&q));

    // A page of another origin frames the dashboard: the browser refuses to
    // render it, while the same page's own frame renders.
    within("framing page", client.goto(&framing.base))
        .await
        .unwrap();
    client.enter_frame(1).await.expect("the page's own frame");
    assert_eq!(text(&client, "#own").await, "own frame");
    client.enter_parent_frame().await.unwrap();
    client.enter_frame(0).await.expect("the dashboard's frame");
    let framed = within("the framed dashboard settles", async {
        loop {
            let state = client
                .execute(
                    "return [document.readyState, document.URL, \
                     document.querySelector('#dead-count') !== null]",
                    vec![],
                )
                .await
                .unwrap();
            if state[0] == "complete" && state[1] != "about:blank" {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(
        framed[2],
        json!(false),
        "the dashboard rendered in a frame: {framed}"
    );
    assert!(
        !framed[1].as_str().unwrap_or("").starts_with(&base),
        "the frame shows the dashboard: {framed}"
    );
    client.enter_parent_frame().await.unwrap();
    screenshot(&client, "queuey-dashboard-framed.png").await;

    client.close().await.expect("browser closes");
    backend.close().await.unwrap();
}

/// The attribute `name` of the element with `id` in `html`, if it has one.
fn attr<'a>(html: &'a str, id: &str, name: &str) -> Option<&'a str> {
    let at = html.find(&format!(" id=\"{id}\""))?;
    let start = html[..at].rfind('<')?;
    let tag = &html[start..start + html[start..].find('>')?];
    let value = tag.split(&format!(" {name}=\"")).nth(1)?;
    value.split('"').next()
}

/// The class of the element with `id` in `html`, if it has one.
fn class_of<'a>(html: &'a str, id: &str) -> Option<&'a str> {
    attr(html, id, "class")
}

/// GETs `path` with `session`'s cookie; the page, which must be there.
async fn get(dash: &Dashboard, session: &PageSession, path: &str) -> String {
    let response = within(
        path,
        http()
            .get(format!("{}{path}", dash.base))
            .header("cookie", &session.cookie)
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

/// POSTs `fields` to `path` with `session`'s cookie and CSRF token; the
/// page answered, which must be there.
async fn post(
    dash: &Dashboard,
    session: &PageSession,
    path: &str,
    fields: &[(&str, &str)],
) -> String {
    let mut form = vec![("csrf", session.csrf.as_str())];
    form.extend_from_slice(fields);
    let response = within(
        path,
        http()
            .post(format!("{}{path}", dash.base))
            .header("cookie", &session.cookie)
            .form(&form)
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_leads_back_and_styles_its_buttons_by_consequence() {
    let h = harness!("dashboard_links");
    let q = h.queue("links");
    let (backend, config) = h.backend(&q).await;
    let job = ("send_email".to_owned(), "HTTP 503".to_owned(), json!({}));
    let made = dead_letter_jobs(&backend, &config, &[job]).await;
    let id = made[0].job_id.to_string();
    let sharded = h.sharded_queue("links-sharded", 2);
    let (sharded_backend, _) = h.sharded_backend(&sharded, 2).await;
    let mut web_config = h.web_config();
    web_config.queues = vec![q.clone(), sharded.clone()];
    let dash = Dashboard::start(web_config).await;
    let queue_page = format!("/queue/{q}");
    let session = page_session(&http(), &format!("{}{queue_page}", dash.base)).await;
    let leads_to = |html: &str, id: &str, path: &str| attr(html, id, "href") == Some(path);

    // The queue page: back to the overview; red only for what loses
    // something for good.
    let page = get(&dash, &session, &queue_page).await;
    assert!(
        inner_html(&page, "back-to-queues").contains("all queues"),
        "{page}"
    );
    assert!(leads_to(&page, "back-to-queues", "/"), "{page}");
    assert!(!page.contains("id=\"lane\""), "{page}");
    for (button, class) in [
        ("pause", "neutral"),
        ("redrive-all", "neutral"),
        ("redrive-0", "neutral"),
        ("purge-all", "danger"),
        ("purge-0", "danger"),
        ("cancel-job", "danger"),
    ] {
        assert_eq!(class_of(&page, button), Some(class), "{button}: {page}");
    }

    // One dead letter's page: back to its queue and to the overview.
    let letter = get(&dash, &session, &format!("{queue_page}/dead/{id}")).await;
    assert!(leads_to(&letter, "back", &queue_page), "{letter}");
    assert!(leads_to(&letter, "back-to-queues", "/"), "{letter}");
    assert_eq!(
        class_of(&letter, "redrive-one"),
        Some("neutral"),
        "{letter}"
    );

    // A shard's page: up to its sharded queue.
    let shard = get(&dash, &session, &format!("/queue/{sharded}.s1")).await;
    let lane = format!("/queue/{sharded}");
    assert!(leads_to(&shard, "lane", &lane), "{shard}");
    assert!(leads_to(&shard, "back-to-queues", "/"), "{shard}");

    // The workers and schedules pages: back to the overview.
    for path in ["/workers", "/schedules"] {
        let page = get(&dash, &session, path).await;
        assert!(leads_to(&page, "back-to-queues", "/"), "{path}: {page}");
    }

    // Previews: a reversible change is confirmed with the main button, a
    // purge with the danger one; each leads back to the queue.
    for (verb, class) in [
        ("pause", "go"),
        ("resume", "go"),
        ("redrive", "go"),
        ("purge", "danger"),
    ] {
        let preview = post(&dash, &session, &format!("{queue_page}/{verb}"), &[]).await;
        assert!(
            preview.contains("Nothing has changed yet"),
            "{verb}: {preview}"
        );
        assert_eq!(
            class_of(&preview, "confirm"),
            Some(class),
            "{verb}: {preview}"
        );
        assert!(leads_to(&preview, "back", &queue_page), "{verb}: {preview}");
    }
    assert_eq!(
        (h.ready(&format!("{q}.dead")).await, h.ready(&q).await),
        (1, 0)
    );

    // Paused: the state stands out without alarm, and resuming is neutral.
    let confirm = [("confirm", "yes")];
    let done = post(&dash, &session, &format!("{queue_page}/pause"), &confirm).await;
    assert!(done.contains("id=\"result\""), "{done}");
    let page = get(&dash, &session, &queue_page).await;
    assert_eq!(class_of(&page, "paused"), Some("warn"), "{page}");
    assert_eq!(class_of(&page, "resume"), Some("neutral"), "{page}");
    let index = get(&dash, &session, "/").await;
    assert!(
        index.contains("<span class=\"warn\">paused</span>"),
        "{index}"
    );
    post(&dash, &session, &format!("{queue_page}/resume"), &confirm).await;

    backend.close().await.unwrap();
    sharded_backend.close().await.unwrap();
}

/// A page on another local port that frames `target` and one page of its own.
struct FramingPage {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl FramingPage {
    async fn start(target: &str) -> FramingPage {
        use axum::response::Html;
        use axum::routing::get;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let outer = format!(
            "<!doctype html><title>framing</title>\
             <iframe src=\"{target}\" width=600 height=300></iframe>\
             <iframe src=\"/own\" width=600 height=100></iframe>"
        );
        let app = axum::Router::new()
            .route("/", get(move || async move { Html(outer) }))
            .route(
                "/own",
                get(|| async { Html("<!doctype html><p id=\"own\">own frame</p>") }),
            );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FramingPage { base, task }
    }
}

impl Drop for FramingPage {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn the_dashboard_asks_for_its_token_or_password_and_stays_local_without() {
    let h = harness!("dashboard_auth");
    let http = http();
    let start = |auth: web::Auth| {
        let mut config = h.web_config();
        config.auth = auth;
        Dashboard::start(config)
    };
    const TOKEN: &str = "s3cret-0123456789abcdef";

    let dash = start(web::Auth::Token(TOKEN.into())).await;
    let base = dash.base.clone();
    let get = |path: String| http.get(path).send();
    assert_eq!(get(format!("{base}/")).await.unwrap().status(), 401);
    assert_eq!(get(format!("{base}/?token=")).await.unwrap().status(), 401);
    let empty_cookie = http
        .get(format!("{base}/"))
        .header("cookie", "queuey_token=")
        .send()
        .await
        .unwrap();
    assert_eq!(empty_cookie.status(), 401);
    let with_query = get(format!("{base}/?token={TOKEN}")).await.unwrap();
    let (status, cookie) = (
        with_query.status(),
        with_query.headers().get("set-cookie").cloned(),
    );
    assert_eq!(
        status,
        200,
        "{}",
        with_query.text().await.unwrap_or_default()
    );
    assert!(cookie.unwrap().to_str().unwrap().contains("HttpOnly"));
    let bearer = http
        .get(format!("{base}/"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
    assert_eq!(
        http.get(format!("{base}/"))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    drop(dash);

    let dash = start(web::Auth::Basic {
        user: "ops".into(),
        password: "pw".into(),
    })
    .await;
    let base = dash.base.clone();
    let empty = http
        .get(format!("{base}/"))
        .header("authorization", "Basic Og==")
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 401);
    let denied = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    assert!(denied.headers().contains_key("www-authenticate"));
    let ok = http
        .get(format!("{base}/"))
        .basic_auth("ops", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    drop(dash);

    // Beyond localhost without authentication: refused before serving.
    let open = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let refused = web::serve(open, h.web_config()).await;
    assert!(refused.unwrap_err().to_string().contains("--token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_page_shows_busy_jobs_and_cancels_one_after_a_preview() {
    let h = harness!("dashboard-workers");
    let Some(driver) = Driver::start().await else {
        return;
    };
    let q = h.queue("busy");
    let (backend, _) = h.backend(&q).await;
    let worker = crate::tests::fleet::control_backend(&h, "worker").await;
    let long = queuey_core::Uuid::new_v4();
    let mut beat = crate::tests::fleet::beat(&q, long, Duration::from_secs(1_200));
    let mut short = beat.running[0].clone();
    short.job_id = queuey_core::Uuid::new_v4();
    short.job_type = "send_email".into();
    short.started_at_ms = beat.at_ms - 4_000;
    // A forged report: markup and script in the message, which the page
    // must show as text.
    let forged = "<img src=x id=forged><script>document.title='owned'</script>";
    short.progress = Some(queuey_core::control::Progress {
        percent: 7,
        message: forged.into(),
    });
    short.tenant = Some("globex".into());
    let mut quiet = short.clone();
    quiet.job_id = queuey_core::Uuid::new_v4();
    quiet.progress = None;
    let (short_id, quiet_id) = (short.job_id, quiet.job_id);
    beat.running.extend([short, quiet]);
    queuey_core::backend::Heartbeats::heartbeat(&worker, &beat)
        .await
        .unwrap();

    let mut config = h.web_config();
    config.queues = vec![q.clone()];
    let dash = Dashboard::start(config).await;
    let base = dash.base.clone();
    let client = driver.client().await;
    within("index", client.goto(&format!("{base}/")))
        .await
        .unwrap();
    assert!(text(&client, "#queues").await.contains("running"));
    click(&client, "#workers-link").await;
    let workers = text(&client, "#workers").await;
    assert!(workers.contains("ops-test-host:4242"), "{workers}");
    assert!(workers.contains("3/8"), "{workers}");
    let busy = text(&client, "#busy").await;
    assert!(busy.contains(&long.to_string()), "{busy}");
    assert!(busy.contains("long"), "{busy}");
    // Each running job's progress: a bar, its percentage and its message.
    let bar = element(&client, &format!("#progress-{long} progress")).await;
    assert_eq!(bar.attr("max").await.unwrap().as_deref(), Some("100"));
    assert_eq!(bar.attr("value").await.unwrap().as_deref(), Some("40"));
    let shown = text(&client, &format!("#progress-{long}")).await;
    assert!(shown.contains("40% 4 of 10 pages"), "{shown}");
    // How many of each tenant's jobs run: two of globex's, one of acme's.
    let tenants = text(&client, "#tenants").await;
    for row in [["globex", q.as_str(), "2"], ["acme", q.as_str(), "1"]] {
        assert!(
            tenants.lines().any(|l| l.split_whitespace().eq(row)),
            "{row:?} in {tenants}"
        );
    }
    let shown = text(&client, &format!("#progress-{short_id}")).await;
    assert!(shown.contains(&format!("7% {forged}")), "{shown}");
    let forged_bar = element(&client, &format!("#progress-{short_id} progress")).await;
    assert_eq!(
        forged_bar.attr("value").await.unwrap().as_deref(),
        Some("7")
    );
    for css in ["#forged", "#busy img", "#busy script"] {
        let found = client.find_all(Locator::Css(css)).await.unwrap();
        assert!(found.is_empty(), "{css}: the message became markup");
    }
    assert_ne!(client.title().await.unwrap(), "owned");
    assert_eq!(text(&client, &format!("#progress-{quiet_id}")).await, "-");
    screenshot(&client, "queuey-dashboard-workers.png").await;

    click(&client, &format!("#cancel-{long}")).await;
    assert!(
        text(&client, "#preview")
            .await
            .contains("(ops-test-host:4242)")
    );
    click(&client, "#confirm").await;
    assert!(text(&client, "#result").await.contains(&long.to_string()));
    let fleet = crate::fleet::Fleet::connect_to(
        &h.url,
        &crate::TlsFiles::default(),
        "queuey-ops-test-dashboard-state",
        &h.control_stream(),
    )
    .await
    .unwrap();
    assert!(fleet.state().await.unwrap().is_cancelled_id(long));
    fleet.close().await;
    let _ = client.close().await;
    worker.close().await.unwrap();
    backend.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letters_page_shows_when_it_died_and_the_error_of_each_attempt() {
    use futures::StreamExt;
    use queuey_core::backend::Backend;

    let h = harness!("dashboard_story");
    let Some(driver) = Driver::start().await else {
        return;
    };
    let q = h.queue("web-story");
    let (backend, config) = h.backend(&q).await;
    // The third attempt of a job whose first two failed and were retried.
    let raw = serde_json::value::to_raw_value(&json!({ "n": 1 })).unwrap();
    let mut env = queuey_core::Envelope::new("send_email", q.as_str(), raw);
    env.record_error(
        "HTTP 503 from upstream",
        crate::time::now_ms() as u64 - 2_000,
    );
    env.attempt = 2;
    env.record_error("connection reset", crate::time::now_ms() as u64 - 1_000);
    env.attempt = 3;
    within("publish", backend.publish(&env))
        .await
        .expect("publish");
    let mut stream = within("consume", backend.consume(&config))
        .await
        .expect("consume");
    let delivery = within("delivery", stream.next())
        .await
        .expect("a delivery")
        .expect("delivery ok");
    let dead = queuey_core::Disposition::DeadLetter {
        reason: "fatal: HTTP 410 gone".into(),
    };
    within("dead-letter", delivery.settle(dead))
        .await
        .expect("dead-lettered");
    drop(stream);

    let mut web_config = h.web_config();
    web_config.queues = vec![q.clone()];
    let dash = Dashboard::start(web_config).await;
    let client = driver.client().await;
    within(
        "queue page",
        client.goto(&format!("{}/queue/{q}", dash.base)),
    )
    .await
    .unwrap();
    let listed = text(&client, "#dead").await;
    assert!(
        listed.contains("died") && listed.contains("ago)"),
        "{listed}"
    );
    click(&client, &format!("#dead a[href$=\"/{}\"]", env.job_id)).await;
    let died_at = text(&client, "#died-at").await;
    assert!(died_at.ends_with("ago)"), "{died_at}");
    assert!(!text(&client, "#enqueued-at").await.is_empty());
    let attempts = text(&client, "#attempts").await;
    for (i, error) in [
        "HTTP 503 from upstream",
        "connection reset",
        "fatal: HTTP 410 gone",
    ]
    .iter()
    .enumerate()
    {
        let at = attempts
            .find(error)
            .unwrap_or_else(|| panic!("{error:?} not in {attempts}"));
        assert!(attempts[..at].contains(&(i + 1).to_string()), "{attempts}");
    }
    assert!(attempts.contains("3 (died)"), "{attempts}");
    screenshot(&client, "queuey-dashboard-dead-letter.png").await;
    client.close().await.expect("browser closes");
    backend.close().await.unwrap();
}
