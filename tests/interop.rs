//! The wire format of `docs/wire-format.md`, as code in another language
//! meets it: `tests/interop/pika_client.py`, written from that page with
//! the `pika` client, publishes envelopes by hand into a queue set a queuey
//! worker consumes, and reads the dead letter back.
//!
//! Needs `AMQP_URL` and `python3` with `pika`; without either it skips with
//! a notice, and under `QUEUEY_REQUIRE_BROKER=1` it fails instead (CI
//! installs `pika`). Its queues have fresh names and are deleted at the end,
//! also when the test fails.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{Connection, ConnectionProperties};
use queuey::job::Uuid;
use queuey::prelude::*;
use queuey::queue::Namespace;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Every wait of the test is bounded by this.
const WAIT: Duration = Duration::from_secs(30);

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "shop")]
enum ShopQueues {
    // One attempt: a failure goes straight to the dead-letter queue, so no
    // hold queue is ever created.
    #[queue(retry(max_attempts = 1))]
    Orders,
}

#[derive(Job, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[job(queue = ShopQueues::Orders, name = "place_order")]
struct PlaceOrder {
    sku: String,
    quantity: u32,
}

/// What the handler saw of one job.
#[derive(Debug)]
struct Seen {
    order: PlaceOrder,
    job_id: Uuid,
    queue: String,
    attempt: u32,
    deferrals: u32,
    priority: u8,
    correlation_id: Option<String>,
}

// One thread: when the test fails, nothing of the worker runs again while
// the queues are deleted (a running consumer would declare its queue again).
#[tokio::test(flavor = "current_thread")]
async fn jobs_published_by_pika_run_and_their_dead_letter_reads_back_as_documented() {
    let test = "interop";
    let Some(url) = broker_url(test) else { return };
    let Some(python) = python_with_pika(test) else {
        return;
    };
    let id = Uuid::new_v4().simple().to_string();
    let namespace = Namespace::new(format!("queuey-test.interop.{id}")).unwrap();
    let queue = format!("queuey-test.interop.{id}.shop.orders");
    let dead = format!("{queue}.dead");
    let _cleanup = Cleanup {
        url: url.clone(),
        queues: vec![
            queue.clone(),
            dead.clone(),
            format!("{queue}.suspect"),
            format!("queuey-test.interop.{id}.control"),
            format!("queuey-test.interop.{id}.control.workers"),
        ],
    };

    let options = RabbitMqOptions::default().connection_name(format!("queuey-test-interop-{id}"));
    #[cfg(feature = "fleet")]
    let options = options.control_stream(format!("queuey-test.interop.{id}.control"));
    let backend = Arc::new(
        within(
            "connecting",
            RabbitMqBackend::with_options(url.as_str(), options),
        )
        .await
        .expect("the backend connects"),
    );
    let (seen, mut arrivals) = mpsc::unbounded_channel();
    let worker = Worker::<ShopQueues, _>::builder(backend.clone())
        .namespace(namespace)
        .handler(handler_fn(move |order: PlaceOrder, ctx: JobContext| {
            let seen = seen.clone();
            async move {
                let discontinued = order.sku.starts_with("DISCONTINUED");
                let sku = order.sku.clone();
                let _ = seen.send(Seen {
                    order,
                    job_id: ctx.job_id(),
                    queue: ctx.queue().to_owned(),
                    attempt: ctx.attempt(),
                    deferrals: ctx.deferrals(),
                    priority: ctx.priority(),
                    correlation_id: ctx.correlation_id().map(str::to_owned),
                });
                if discontinued {
                    return Err(JobError::fatal(format!("SKU {sku} is discontinued")));
                }
                Ok(())
            }
        }))
        .build()
        .await
        .expect("the worker declares its queue set");
    assert_eq!(worker.queues().collect::<Vec<_>>(), [queue.as_str()]);
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    let published = pika(
        &python,
        "publish",
        &url,
        &queue,
        &format!("queuey-test-interop-pika-publish-{id}"),
    )
    .await;
    let accepted = &published["accepted"];
    let rejected = &published["rejected"];
    let job_id = |job: &Value| Uuid::parse_str(job["job_id"].as_str().unwrap()).unwrap();

    let mut runs = Vec::new();
    for _ in 0..2 {
        runs.push(
            within("both jobs reach the handler", arrivals.recv())
                .await
                .unwrap(),
        );
    }
    runs.sort_by_key(|run| run.order.sku.starts_with("DISCONTINUED"));
    let [ok, failed] = <[Seen; 2]>::try_from(runs).unwrap();
    assert_eq!(
        ok.order,
        PlaceOrder {
            sku: "B-1024".into(),
            quantity: 3
        },
        "the payload arrives typed, the unknown envelope field ignored"
    );
    assert_eq!(ok.job_id, job_id(accepted));
    assert_eq!(ok.queue, queue);
    assert_eq!((ok.attempt, ok.deferrals, ok.priority), (1, 0, 0));
    assert_eq!(ok.correlation_id.as_deref(), Some("checkout-7"));
    assert_eq!(failed.job_id, job_id(rejected));
    assert_eq!(
        (failed.attempt, failed.priority, failed.correlation_id),
        (1, 3, None)
    );

    within("both jobs are settled", async {
        while handle.jobs_finished() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    handle.shutdown();
    within("the worker stops", running)
        .await
        .unwrap()
        .expect("the worker ran without an error");
    assert_eq!(
        ready(&url, &queue).await,
        0,
        "nothing left on the work queue"
    );

    let read = pika(
        &python,
        "read-dead",
        &url,
        &dead,
        &format!("queuey-test-interop-pika-read-{id}"),
    )
    .await;
    let letters = read["messages"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "one dead letter: {read}");
    let letter = &letters[0];
    assert_eq!(
        letter["body"], rejected["body"],
        "the body is the envelope as published, byte for byte"
    );
    assert_eq!(letter["message_id"], rejected["job_id"]);
    assert_eq!(letter["delivery_mode"], json!(2));
    assert_eq!(letter["priority"], Value::Null);
    let headers = letter["headers"].as_object().unwrap();
    let mut names: Vec<&str> = headers.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "x-attempts",
            "x-death-reason",
            "x-died-at",
            "x-original-queue"
        ],
        "only the documented headers: {headers:?}"
    );
    // The handler's error and what it wraps, joined by ": ".
    assert_eq!(
        headers["x-death-reason"],
        json!("fatal: SKU DISCONTINUED-9 is discontinued")
    );
    assert_eq!(headers["x-original-queue"], json!(queue));
    // A JSON number: pika decoded an AMQP integer, not a string.
    assert_eq!(headers["x-attempts"], json!(1));
    assert!(headers["x-died-at"].as_i64().is_some_and(|ms| ms > 0));

    drop(backend);
}

/// The broker's URL, or `None` after a notice when the test should skip.
fn broker_url(test: &str) -> Option<String> {
    match std::env::var("AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => skip(
            test,
            "set AMQP_URL (e.g. amqp://guest:guest@127.0.0.1:5672/%2f)",
        ),
    }
}

/// `python3` when it can import `pika`, or `None` after a notice when the
/// test should skip.
fn python_with_pika(test: &str) -> Option<String> {
    let python = "python3".to_owned();
    let found = Command::new(&python)
        .args(["-c", "import pika"])
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        Some(python)
    } else {
        skip(
            test,
            &format!("install pika for `{python}` (`{python} -m pip install pika`)"),
        )
    }
}

/// Skips with a notice, or fails when `QUEUEY_REQUIRE_BROKER=1` requires the
/// test to run.
fn skip<T>(test: &str, what: &str) -> Option<T> {
    if std::env::var("QUEUEY_REQUIRE_BROKER").as_deref() == Ok("1") {
        panic!("{test}: QUEUEY_REQUIRE_BROKER=1 requires this test to run: {what}");
    }
    // Straight to stderr, past the test harness's output capture, so the
    // skip shows in a plain `cargo test`.
    let _ = writeln!(std::io::stderr(), "skipping {test}: {what} to run it");
    None
}

/// Runs the Python client and parses the JSON it prints.
async fn pika(python: &str, command: &str, url: &str, queue: &str, name: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/pika_client.py");
    let mut run = Command::new(python);
    run.arg(script).args([command, url, queue, name]);
    let out = within(
        "the Python client",
        tokio::task::spawn_blocking(move || run.output()),
    )
    .await
    .unwrap()
    .expect("python3 starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pika_client.py {command} failed ({}): {}{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Messages ready on `queue`, by a passive declare on a connection of its own.
async fn ready(url: &str, queue: &str) -> u32 {
    let connection = within(
        "connecting",
        Connection::connect(
            url,
            ConnectionProperties::default().with_connection_name("queuey-test-interop-raw".into()),
        ),
    )
    .await
    .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let count = channel
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .unwrap()
        .message_count();
    let _ = connection.close(200, ShortString::default()).await;
    count
}

/// Awaits `future`, failing the test past [`WAIT`].
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?}: {what}"))
}

/// Deletes the test's queues when dropped, also after a panic.
struct Cleanup {
    url: String,
    queues: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let url = self.url.clone();
        let queues = std::mem::take(&mut self.queues);
        // A runtime of its own on a thread of its own: this also runs while
        // the test's runtime unwinds.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let properties = ConnectionProperties::default()
                    .with_connection_name("queuey-test-interop-cleanup".into());
                let Ok(connection) = Connection::connect(&url, properties).await else {
                    return;
                };
                for queue in queues {
                    if let Ok(channel) = connection.create_channel().await {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(5),
                            channel
                                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default()),
                        )
                        .await;
                        let _ = channel.close(200, ShortString::default()).await;
                    }
                }
                let _ = connection.close(200, ShortString::default()).await;
            });
        });
        let _ = cleanup.join();
    }
}
