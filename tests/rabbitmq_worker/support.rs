//! Broker access for the worker's end-to-end tests: the address (or a skip),
//! queue sets with names unique to each test, a raw lapin connection for
//! assertions, forced connection closes, and cleanup.

use std::future::Future;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use lapin::message::BasicGetMessage;
use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Connection, ConnectionProperties};
use queuey::Uuid;

/// Every wait is bounded by this unless it says otherwise.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Awaits `f`, failing the test after [`WAIT`].
pub(crate) async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?}: {what}"))
}

/// Polls `done` every 20 ms until it holds, failing after [`WAIT`].
pub(crate) async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    within(what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// A queue name no other test (or run) uses.
pub(crate) fn unique_name(label: &str) -> &'static str {
    let name = format!("queuey-e2e.{label}.{}", Uuid::new_v4().simple());
    Box::leak(name.into_boxed_str())
}

/// A queue set with one queue, `Work`, whose name is unique to the test
/// binary's run, and a job type `$job` on it.
macro_rules! scenario {
    ($queues:ident, $job:ident, $label:literal, $config:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum $queues {
            Work,
        }

        impl queuey::Queues for $queues {
            const ALL: &'static [Self] = &[$queues::Work];

            fn name(&self) -> &'static str {
                static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
                NAME.get_or_init(|| $crate::support::unique_name($label))
            }

            fn config(&self) -> queuey::QueueConfig {
                let config: fn(queuey::QueueConfig) -> queuey::QueueConfig = $config;
                config(queuey::QueueConfig::new(self.name()))
            }
        }

        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        struct $job {
            n: u32,
        }

        impl queuey::Job for $job {
            type Queues = $queues;
            const QUEUE: $queues = $queues::Work;
            const NAME: &'static str = "e2e_job";
        }
    };
}

/// The broker address, or `None` after a notice when the test should skip.
fn amqp_url(test: &str) -> Option<String> {
    match std::env::var("AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("QUEUEY_REQUIRE_BROKER").as_deref() == Ok("1") => {
            panic!("{test}: QUEUEY_REQUIRE_BROKER=1 but AMQP_URL is not set")
        }
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "skipping {test}: set AMQP_URL (e.g. amqp://guest:guest@127.0.0.1:5672/%2f) to run it"
            );
            None
        }
    }
}

/// Gets the test's [`Broker`] or returns from the test (skip).
macro_rules! broker {
    ($name:expr) => {
        match $crate::support::Broker::new($name).await {
            Some(broker) => broker,
            None => return,
        }
    };
}

/// One test's view of the broker; deletes the queues it was told about when
/// dropped, even after a panic.
pub(crate) struct Broker {
    pub(crate) url: String,
    raw: Connection,
    queues: Mutex<Vec<String>>,
    id: String,
}

impl Broker {
    pub(crate) async fn new(test: &str) -> Option<Broker> {
        let url = amqp_url(test)?;
        let id = Uuid::new_v4().simple().to_string();
        let props = ConnectionProperties::default()
            .with_connection_name(format!("queuey-e2e-raw-{id}").into());
        let raw = within("raw connection", Connection::connect(&url, props))
            .await
            .expect("the broker at AMQP_URL accepts a connection");
        Some(Broker {
            url,
            raw,
            queues: Mutex::new(Vec::new()),
            id,
        })
    }

    /// Deletes `queue` when the test ends.
    pub(crate) fn track(&self, queue: impl Into<String>) {
        self.queues.lock().unwrap().push(queue.into());
    }

    /// A connection name unique to this test.
    pub(crate) fn connection_name(&self, label: &str) -> String {
        format!("queuey-e2e-{label}-{}", self.id)
    }

    /// Whether the queue exists (a passive declare on a channel of its own).
    pub(crate) async fn exists(&self, queue: &str) -> bool {
        let channel = self.raw.create_channel().await.expect("a channel");
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let found = channel
            .queue_declare(queue.into(), options, FieldTable::default())
            .await
            .is_ok();
        let _ = channel.close(200, ShortString::default()).await;
        found
    }

    /// Ready and unacknowledged message counts, through `rabbitmqctl`.
    pub(crate) async fn counts(&self, queue: &str) -> (u64, u64) {
        let out = rabbitmqctl(&[
            "list_queues",
            "name",
            "messages_ready",
            "messages_unacknowledged",
            "-q",
            "--no-table-headers",
        ])
        .await;
        out.lines()
            .filter_map(|line| {
                let mut cols = line.split('\t');
                (cols.next()? == queue).then(|| {
                    let ready = cols.next()?.trim().parse().ok()?;
                    let unacked = cols.next()?.trim().parse().ok()?;
                    Some((ready, unacked))
                })?
            })
            .next()
            .unwrap_or_else(|| panic!("queue {queue} not listed:\n{out}"))
    }

    /// Takes one message off a queue (acknowledged at once), if there is one.
    pub(crate) async fn get(&self, queue: &str) -> Option<BasicGetMessage> {
        let channel = self.raw.create_channel().await.expect("a channel");
        let got = channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get");
        let _ = channel.close(200, ShortString::default()).await;
        got
    }

    /// Closes, from the broker's side, the connection whose client
    /// properties contain `name` (only ever one of this test's own).
    pub(crate) async fn close_connection(&self, name: &str) {
        let list = rabbitmqctl(&[
            "list_connections",
            "pid",
            "client_properties",
            "-q",
            "--no-table-headers",
        ])
        .await;
        let pid = list
            .lines()
            .find(|l| l.contains(name))
            .and_then(|l| l.split('\t').next())
            .unwrap_or_else(|| panic!("no connection named {name} in:\n{list}"))
            .to_owned();
        rabbitmqctl(&["close_connection", &pid, "queuey e2e test: forced close"]).await;
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let queues = std::mem::take(&mut *self.queues.lock().unwrap_or_else(|p| p.into_inner()));
        let url = self.url.clone();
        // A runtime of its own, so cleanup also runs after a panic.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let props = ConnectionProperties::default()
                    .with_connection_name("queuey-e2e-cleanup".into());
                let Ok(conn) = Connection::connect(&url, props).await else {
                    return;
                };
                for queue in queues {
                    if let Ok(channel) = conn.create_channel().await {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(5),
                            channel
                                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default()),
                        )
                        .await;
                        let _ = channel.close(200, ShortString::default()).await;
                    }
                }
                let _ = conn.close(200, ShortString::default()).await;
            });
        });
        let _ = cleanup.join();
    }
}

pub(crate) async fn rabbitmqctl(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let out = within(
        "rabbitmqctl",
        tokio::task::spawn_blocking(move || {
            std::process::Command::new("rabbitmqctl")
                .args(&args)
                .output()
        }),
    )
    .await
    .expect("the rabbitmqctl task")
    .expect("rabbitmqctl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A header of a fetched message, as text.
pub(crate) fn header(message: &BasicGetMessage, key: &str) -> Option<String> {
    let headers = message.delivery.properties.headers().as_ref()?;
    match headers.inner().get(key)? {
        AMQPValue::LongString(s) => Some(s.to_string()),
        AMQPValue::LongInt(n) => Some(n.to_string()),
        AMQPValue::LongLongInt(n) => Some(n.to_string()),
        AMQPValue::LongUInt(n) => Some(n.to_string()),
        AMQPValue::ShortInt(n) => Some(n.to_string()),
        other => Some(format!("{other:?}")),
    }
}
