//! The hold watchdog's side of the backend, with a stand-in for the
//! management API on a loopback port: an API that hangs up or refuses is
//! logged once at INFO, without the password, while the backend works on;
//! a hold the API shows stuck is reported, and cleared when it releases.
//! The stall itself on a real broker is the fault suite's
//! `hold_watch` test (a private node).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use queuey_core::backend::Backend;
use queuey_core::{Disposition, Envelope, QueueConfig};
use queuey_rabbitmq::RabbitMqOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::support::{
    log_leaks, warnings_mentioning, watch_notices_mentioning, watch_secret, within,
};

/// Room for `close()` after a dropped stream: its steps' own bounds.
const CLOSE_BOUND: Duration = Duration::from_secs(120);

/// How the stand-in answers.
#[derive(Clone)]
enum Answer {
    /// Closes the connection without a word.
    HangUp,
    /// An empty answer with this status.
    Status(u16),
    /// `200 OK` with this JSON body.
    Listing(String),
}

/// A stand-in for the management API: answers every request as told at
/// the time, and keeps each request's head.
struct FakeApi {
    port: u16,
    state: Arc<Mutex<(Answer, Vec<String>)>>,
    task: JoinHandle<()>,
}

impl FakeApi {
    async fn start(answer: Answer) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new((answer, Vec::new())));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let answer = {
                        let mut state = state.lock().unwrap();
                        state.1.push(String::from_utf8_lossy(&head).into_owned());
                        state.0.clone()
                    };
                    let response = match answer {
                        Answer::HangUp => return,
                        Answer::Status(code) => format!(
                            "HTTP/1.1 {code} No\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        ),
                        Answer::Listing(body) => format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                    };
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        FakeApi { port, state, task }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().1.clone()
    }

    fn answer(&self, answer: Answer) {
        self.state.lock().unwrap().0 = answer;
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits (polling) until `condition` holds, within the suite's bound.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Options reading the stand-in as `watcher` with `password`, fast.
fn watched(api: &FakeApi, password: &str) -> RabbitMqOptions {
    RabbitMqOptions::default()
        .management_url(format!("http://watcher:{password}@{}", api.address()))
        .hold_watch_interval(Duration::from_millis(100))
        .hold_stall_after(Duration::from_millis(500))
}

fn a_job(queue: &str) -> Envelope {
    let payload = serde_json::value::to_raw_value(&serde_json::json!({"n": 1})).unwrap();
    Envelope::new("watched", queue, payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_that_hangs_up_is_logged_once_and_the_backend_works_on() {
    let broker = broker!("an_api_that_hangs_up_is_logged_once_and_the_backend_works_on");
    let secret = format!("pw{}", uuid::Uuid::new_v4().simple());
    watch_secret(&secret);
    let api = FakeApi::start(Answer::HangUp).await;
    let backend = broker.backend(watched(&api, &secret)).await;

    let q = broker.queue("watch-away");
    let config = QueueConfig::new(q.as_str());
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut deliveries = within("consume", backend.consume(&config)).await.unwrap();
    until("five reads of the API", || api.requests().len() >= 5).await;
    within("publish", backend.publish(&a_job(&q)))
        .await
        .unwrap();
    let delivery = within("the job", deliveries.next()).await.unwrap().unwrap();
    within("ack", delivery.settle(Disposition::Ack))
        .await
        .unwrap();
    until("five more reads", || api.requests().len() >= 10).await;

    let notices = watch_notices_mentioning(&api.address());
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("not watched"), "{notices:?}");
    assert!(backend.stalled_holds().is_empty());
    let requests = api.requests();
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains("authorization: basic "),
        "{requests:?}"
    );
    assert!(
        requests.iter().all(|r| !r.contains(&secret)),
        "{requests:?}"
    );
    let (leaks, _) = log_leaks();
    assert!(leaks.iter().all(|l| !l.contains(&secret)), "{leaks:?}");
    drop(deliveries);
    // Closing retires the dropped stream's consumers first, each step bound
    // by the call timeout (30 s): on a loaded machine that can outlast the
    // tests' usual 20 s. This test is about the watchdog; a close that
    // never returns still fails it.
    tokio::time::timeout(CLOSE_BOUND, backend.close())
        .await
        .expect("the backend closes within its own bounds")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_that_refuses_the_credentials_says_so_once_and_when_it_reads_again() {
    let broker =
        broker!("an_api_that_refuses_the_credentials_says_so_once_and_when_it_reads_again");
    let secret = format!("pw{}", uuid::Uuid::new_v4().simple());
    watch_secret(&secret);
    let api = FakeApi::start(Answer::Status(401)).await;
    let backend = broker.backend(watched(&api, &secret)).await;
    until("five reads of the API", || api.requests().len() >= 5).await;
    let notices = watch_notices_mentioning(&api.address());
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("401"), "{notices:?}");

    api.answer(Answer::Listing("[]".to_owned()));
    until("a notice that the API reads again", || {
        watch_notices_mentioning(&api.address()).len() == 2
    })
    .await;
    let notices = watch_notices_mentioning(&api.address());
    assert!(notices[1].contains("can be read again"), "{notices:?}");
    let (leaks, _) = log_leaks();
    assert!(leaks.iter().all(|l| !l.contains(&secret)), "{leaks:?}");
    within("close", backend.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_api_shows_stuck_is_reported_and_cleared_when_it_releases() {
    let broker = broker!("a_hold_the_api_shows_stuck_is_reported_and_cleared_when_it_releases");
    let q = broker.queue("watch-stuck");
    let hold = format!("{q}.deferred.quorum.1000");
    let listing = |stuck: u64| {
        serde_json::json!([
            {"name": q, "messages": 0, "messages_ready": 0, "messages_unacknowledged": 0},
            {"name": hold, "messages": stuck, "messages_ready": 0, "messages_unacknowledged": 0},
            // A hold of a queue this backend did not declare.
            {"name": "someone.else.deferred.quorum.1000", "messages": 9, "messages_ready": 0,
             "messages_unacknowledged": 0}
        ])
        .to_string()
    };
    let api = FakeApi::start(Answer::Listing(listing(5))).await;
    let backend = broker.backend(watched(&api, "guest")).await;
    let config = QueueConfig::new(q.as_str());
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();

    until("the hold reported", || !backend.stalled_holds().is_empty()).await;
    let stalled = backend.stalled_holds();
    assert_eq!(stalled.len(), 1, "{stalled:?}");
    assert_eq!(
        (
            stalled[0].hold.as_str(),
            stalled[0].queue.as_str(),
            stalled[0].jobs
        ),
        (hold.as_str(), q.as_str(), 5)
    );
    let warnings = warnings_mentioning(&hold);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    for needed in [
        "5 jobs",
        "ra:restart_server",
        "3.10.20",
        "queuey holds",
        "queuey doctor",
    ] {
        assert!(warnings[0].contains(needed), "`{needed}` in {warnings:?}");
    }

    api.answer(Answer::Listing(listing(0)));
    until("the report cleared", || backend.stalled_holds().is_empty()).await;
    let notices = watch_notices_mentioning(&hold);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("releases its jobs again")),
        "{notices:?}"
    );
    assert_eq!(warnings_mentioning(&hold).len(), 1);
    within("close", backend.close()).await.unwrap();
}
