//! The dashboard's exposure rules over plain HTTP: which hosts, origins,
//! credentials and queues it refuses, and that a refused change changes
//! nothing on the broker.

use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::json;

use crate::tests::support::{Harness, dead_letter_jobs, harness, queuey_bin, within};
use crate::web::{self, Auth, WebConfig};

/// A dashboard serving one test on a fresh loopback port, stopped on drop.
pub(crate) struct Dashboard {
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The listening port.
    pub(crate) port: u16,
    task: tokio::task::JoinHandle<crate::Result<()>>,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Dashboard {
    /// Serves `config` with [`web::serve`]. Requests made before it is
    /// connected to the broker wait in the listen backlog. Build `config`
    /// with `Harness::web_config`, on the test's own control stream.
    pub(crate) async fn start(config: WebConfig) -> Dashboard {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        Dashboard {
            base: format!("http://127.0.0.1:{port}"),
            port,
            task: tokio::spawn(web::serve(listener, config)),
        }
    }
}

/// An HTTP client that shows redirects and keeps no cookies.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// What a browser keeps from a page to post its forms: the session cookie
/// (`name=value`) and the CSRF token.
pub(crate) struct PageSession {
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

/// Reads `url` (a page with forms) as a browser would.
pub(crate) async fn page_session(http: &reqwest::Client, url: &str) -> PageSession {
    let response = within(url, http.get(url).send()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{url}");
    let cookie = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("queuey_session="))
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let body = response.text().await.unwrap();
    let start = body.find("name=\"csrf\" value=\"").expect("a form") + 19;
    let csrf = body[start..].split('"').next().unwrap().to_owned();
    PageSession { cookie, csrf }
}

/// A work queue with `n` dead letters, made by the real backend, and the
/// job id of the first.
async fn with_dead_letters(h: &Harness, label: &str, n: usize) -> (String, String) {
    let q = h.queue(label);
    let (backend, config) = h.backend(&q).await;
    let jobs: Vec<_> = (0..n)
        .map(|i| {
            (
                "send_email".to_owned(),
                format!("HTTP 503 #{i}"),
                json!({ "n": i }),
            )
        })
        .collect();
    let made = dead_letter_jobs(&backend, &config, &jobs).await;
    backend.close().await.unwrap();
    (q, made[0].job_id.to_string())
}

/// POSTs a confirmed `verb` (redrive or purge) of every dead letter of `q`
/// with a valid session and CSRF token, plus `extra` headers.
async fn confirmed(
    dash: &Dashboard,
    session: &PageSession,
    q: &str,
    verb: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut request = http()
        .post(format!("{}/queue/{q}/{verb}", dash.base))
        .header(header::COOKIE, &session.cookie)
        .form(&[("csrf", session.csrf.as_str()), ("confirm", "yes")]);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = within(verb, request.send()).await.unwrap();
    (response.status(), response.text().await.unwrap())
}

fn assert_locked_down(headers: &HeaderMap, what: &str) {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{what}: no {name}"))
            .to_owned()
    };
    let csp = get("content-security-policy");
    for directive in [
        "default-src 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(directive), "{what}: {csp}");
    }
    assert_eq!(get("x-frame-options"), "DENY", "{what}");
    assert_eq!(get("referrer-policy"), "no-referrer", "{what}");
    assert_eq!(get("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(get("cache-control"), "no-store", "{what}");
}

#[tokio::test]
async fn a_foreign_host_is_refused_and_its_posts_change_nothing() {
    let h = harness!("web_host");
    let (q, _) = with_dead_letters(&h, "web-host", 2).await;
    let dq = format!("{q}.dead");
    let exports = tempfile::tempdir().unwrap();
    let mut config = h.web_config();
    config.export_dir = exports.path().to_owned();
    let dash = Dashboard::start(config).await;
    let page = format!("{}/queue/{q}", dash.base);
    let session = page_session(&http(), &page).await;

    // A DNS-rebinding page: the browser sends its own name as Host.
    let rebound = format!("rebind.attacker.example:{}", dash.port);
    let response = http().get(&page).header("host", &rebound).send().await;
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST);
    let body = response.text().await.unwrap();
    assert!(body.contains(&format!("--public-host {rebound}")), "{body}");
    assert!(!body.contains("csrf"), "{body}");
    for verb in ["purge", "redrive"] {
        let (status, body) = confirmed(&dash, &session, &q, verb, &[("host", &rebound)]).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{verb}: {body}");
    }
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (2, 0));
    assert_eq!(std::fs::read_dir(exports.path()).unwrap().count(), 0);

    // Another port of localhost is another application.
    let other_port = format!("localhost:{}", dash.port.wrapping_add(1));
    let response = http().get(&page).header("host", &other_port).send().await;
    assert_eq!(response.unwrap().status(), StatusCode::MISDIRECTED_REQUEST);

    // The same session and token work under the dashboard's own name.
    let (status, body) = confirmed(&dash, &session, &q, "redrive", &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (0, 2));
}

#[tokio::test]
async fn a_public_host_is_answered_and_https_makes_its_cookies_secure() {
    let h = harness!("web_public_host");
    let mut config = h.web_config();
    config.auth = Auth::Token("0123456789abcdef-public".into());
    config.public_hosts = vec![
        "https://dash.example.com".parse().unwrap(),
        "lan-box:9999".parse().unwrap(),
    ];
    let dash = Dashboard::start(config).await;
    let url = format!("{}/?token=0123456789abcdef-public", dash.base);
    let cookies = |response: &reqwest::Response| -> Vec<String> {
        response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    };

    let proxied = http()
        .get(&url)
        .header("host", "dash.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), StatusCode::OK);
    let set = cookies(&proxied);
    assert_eq!(set.len(), 2, "{set:?}");
    assert!(set.iter().all(|c| c.contains("; Secure")), "{set:?}");

    let direct = http().get(&url).send().await.unwrap();
    assert_eq!(direct.status(), StatusCode::OK);
    let set = cookies(&direct);
    assert!(set.iter().all(|c| c.contains("HttpOnly")), "{set:?}");
    assert!(set.iter().all(|c| c.contains("SameSite=Strict")), "{set:?}");
    assert!(!set.iter().any(|c| c.contains("Secure")), "{set:?}");

    let lan = http().get(&url).header("host", "lan-box:9999").send().await;
    assert_eq!(lan.unwrap().status(), StatusCode::OK);
    let wrong_port = http().get(&url).header("host", "lan-box").send().await;
    assert_eq!(
        wrong_port.unwrap().status(),
        StatusCode::MISDIRECTED_REQUEST
    );
}

#[tokio::test]
async fn on_every_interface_the_address_a_connection_arrived_on_is_answered() {
    let h = harness!("web_wildcard");
    const TOKEN: &str = "0123456789abcdef-wildcard";
    let mut config = h.web_config();
    config.auth = Auth::Token(TOKEN.into());
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(web::serve(listener, config));
    // 127.0.0.2 is neither a loopback name the dashboard knows nor its
    // bind address: only the connection's own address vouches for it.
    let url = format!("http://127.0.0.2:{port}/");
    let arrived = match http().get(&url).bearer_auth(TOKEN).send().await {
        Ok(response) => response,
        Err(e) => {
            server.abort();
            eprintln!("skipping: this system does not route 127.0.0.2 to loopback ({e})");
            return;
        }
    };
    assert_eq!(arrived.status(), StatusCode::OK);
    let elsewhere = http()
        .get(&url)
        .bearer_auth(TOKEN)
        .header("host", format!("127.0.0.3:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::MISDIRECTED_REQUEST);
    server.abort();
}

#[tokio::test]
async fn a_cross_site_post_changes_nothing() {
    let h = harness!("web_origin");
    let (q, _) = with_dead_letters(&h, "web-origin", 2).await;
    let dq = format!("{q}.dead");
    let exports = tempfile::tempdir().unwrap();
    let mut config = h.web_config();
    config.export_dir = exports.path().to_owned();
    let dash = Dashboard::start(config).await;
    let session = page_session(&http(), &format!("{}/queue/{q}", dash.base)).await;
    let own = dash.base.clone();

    for (verb, headers) in [
        ("purge", vec![("origin", "http://attacker.example")]),
        ("redrive", vec![("origin", "http://attacker.example")]),
        ("purge", vec![("origin", "null")]),
        ("purge", vec![("sec-fetch-site", "cross-site")]),
        (
            "redrive",
            vec![("origin", own.as_str()), ("sec-fetch-site", "cross-site")],
        ),
        // Another port of the same host is the same site, not the same origin.
        (
            "purge",
            vec![
                ("origin", "http://127.0.0.1:1"),
                ("sec-fetch-site", "same-site"),
            ],
        ),
    ] {
        let (status, body) = confirmed(&dash, &session, &q, verb, &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{verb} {headers:?}: {body}");
        assert!(body.contains("--public-host"), "{body}");
    }
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (2, 0));
    assert_eq!(std::fs::read_dir(exports.path()).unwrap().count(), 0);

    // The dashboard's own page, as a browser sends it, is obeyed.
    let (status, body) = confirmed(
        &dash,
        &session,
        &q,
        "redrive",
        &[("origin", &own), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (0, 2));
}

#[tokio::test]
async fn a_csrf_token_only_works_with_its_own_session() {
    let h = harness!("web_csrf");
    let (q, _) = with_dead_letters(&h, "web-csrf", 1).await;
    let dq = format!("{q}.dead");
    let dash = Dashboard::start(h.web_config()).await;
    let page = format!("{}/queue/{q}", dash.base);
    let mine = page_session(&http(), &page).await;
    let theirs = page_session(&http(), &page).await;
    assert_ne!(mine.csrf, theirs.csrf);
    let swapped = PageSession {
        cookie: theirs.cookie.clone(),
        csrf: mine.csrf.clone(),
    };
    let (status, _) = confirmed(&dash, &swapped, &q, "redrive", &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let no_cookie = PageSession {
        cookie: String::new(),
        csrf: mine.csrf.clone(),
    };
    let (status, _) = confirmed(&dash, &no_cookie, &q, "redrive", &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(h.ready(&dq).await, 1);
}

#[tokio::test]
async fn every_answer_forbids_framing_and_caching() {
    let h = harness!("web_headers");
    let (q, _) = with_dead_letters(&h, "web-headers", 1).await;
    let dash = Dashboard::start(h.web_config()).await;
    let client = http();
    for (what, request, status) in [
        ("index", client.get(format!("{}/", dash.base)), 200),
        (
            "queue page",
            client.get(format!("{}/queue/{q}", dash.base)),
            200,
        ),
        (
            "no such page",
            client.get(format!("{}/nope", dash.base)),
            404,
        ),
        (
            "a foreign host",
            client
                .get(format!("{}/", dash.base))
                .header("host", "attacker.example"),
            421,
        ),
        (
            "a forged post",
            client
                .post(format!("{}/queue/{q}/purge", dash.base))
                .form(&[("confirm", "yes")]),
            403,
        ),
    ] {
        let response = within(what, request.send()).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{what}");
        assert_locked_down(response.headers(), what);
    }

    let mut config = h.web_config();
    config.auth = Auth::Token("0123456789abcdef-headers".into());
    let locked = Dashboard::start(config).await;
    let denied = within("401", client.get(format!("{}/", locked.base)).send())
        .await
        .unwrap();
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);
    assert_locked_down(denied.headers(), "a request without the token");
}

#[tokio::test]
async fn queues_outside_the_allow_list_are_refused() {
    let h = harness!("web_allow_list");
    let (a, _) = with_dead_letters(&h, "web-allowed", 1).await;
    let (b, id) = with_dead_letters(&h, "web-not-allowed", 2).await;
    let b_dead = format!("{b}.dead");
    let exports = tempfile::tempdir().unwrap();
    let mut config = h.web_config();
    config.queues = vec![a.clone()];
    config.export_dir = exports.path().to_owned();
    let dash = Dashboard::start(config).await;
    let client = http();
    let session = page_session(&client, &format!("{}/queue/{a}", dash.base)).await;

    let index = client.get(format!("{}/", dash.base)).send().await.unwrap();
    let index = index.text().await.unwrap();
    assert!(index.contains(&a) && !index.contains(&b), "{index}");
    for path in [
        format!("/queue/{b}"),
        format!("/queue/{b}/dead/{id}"),
        format!("/queue/{a}.dead"),
    ] {
        let response = client
            .get(format!("{}{path}", dash.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let body = response.text().await.unwrap();
        assert!(body.contains("--queue"), "{path}: {body}");
    }
    for verb in ["purge", "redrive"] {
        let (status, body) = confirmed(&dash, &session, &b, verb, &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{verb}: {body}");
    }
    assert_eq!((h.ready(&b_dead).await, h.ready(&b).await), (2, 0));
    assert_eq!(std::fs::read_dir(exports.path()).unwrap().count(), 0);

    // Without --queue: every queue with a dead-letter queue, and only those.
    let open = Dashboard::start(h.web_config()).await;
    let shown = |path: String| {
        let client = client.clone();
        let url = format!("{}{path}", open.base);
        async move { client.get(url).send().await.unwrap().status() }
    };
    assert_eq!(shown(format!("/queue/{b}")).await, StatusCode::OK);
    assert_eq!(
        shown(format!("/queue/{b}.dead")).await,
        StatusCode::NOT_FOUND
    );
    let missing = format!("queuey-ops-test.missing.{}", uuid::Uuid::new_v4().simple());
    assert_eq!(
        shown(format!("/queue/{missing}")).await,
        StatusCode::NOT_FOUND
    );
}

/// Runs `queuey web ARGS` with `env`, which must refuse to start; returns
/// its stderr. A dashboard that starts instead is killed and fails the test.
fn refused_at_start(h: &Harness, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = Command::new(queuey_bin());
    command
        .arg("web")
        .args(args)
        .env("AMQP_URL", &h.url)
        .env("QUEUEY_CONTROL_STREAM", h.control_stream())
        .env_remove("QUEUEY_WEB_TOKEN")
        .env_remove("QUEUEY_WEB_BASIC_AUTH")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("the queuey binary runs");
    let deadline = std::time::Instant::now() + crate::tests::support::WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("queuey web {args:?} {env:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    stderr
}

#[tokio::test]
async fn empty_and_short_credentials_are_refused_at_start() {
    let h = harness!("web_credentials");
    for (args, env, says) in [
        (
            vec!["--listen", "0.0.0.0:0"],
            vec![("QUEUEY_WEB_TOKEN", "")],
            "token is empty",
        ),
        (vec!["--token", "s3cret"], vec![], "at least 16"),
        (vec!["--basic-auth", ":"], vec![], "neither empty"),
        (vec!["--basic-auth", "ops:"], vec![], "neither empty"),
        (
            vec!["--listen", "0.0.0.0:0"],
            vec![("QUEUEY_WEB_BASIC_AUTH", ":")],
            "neither empty",
        ),
    ] {
        let stderr = refused_at_start(&h, &args, &env);
        assert!(stderr.contains(says), "{args:?} {env:?}: {stderr}");
    }

    // The library refuses them too, before it listens.
    for auth in [
        Auth::Token(String::new()),
        Auth::Token("s3cret".into()),
        Auth::Basic {
            user: String::new(),
            password: String::new(),
        },
    ] {
        let mut config = h.web_config();
        config.auth = auth.clone();
        for unchecked in [false, true] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let served = if unchecked {
                within(
                    "serve_unchecked",
                    web::serve_unchecked(listener, config.clone()),
                )
                .await
            } else {
                within("serve", web::serve(listener, config.clone())).await
            };
            let e = served.expect_err("refused").to_string();
            assert!(
                e.contains("empty") || e.contains("at least 16"),
                "{auth:?}: {e}"
            );
        }
        let listen = "127.0.0.1:1".parse().unwrap();
        let e = web::router(config, listen).await.expect_err("refused");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
