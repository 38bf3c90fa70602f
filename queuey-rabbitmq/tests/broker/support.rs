//! Shared test harness: broker address, unique names, cleanup, a raw lapin
//! connection for assertions, `rabbitmqctl`, and log capture (secrets must
//! never show; warnings and errors are kept for tests to inspect).
//!
//! The worker's end-to-end tests (`tests/rabbitmq_worker/` at the root)
//! include this file too, so each helper is written once.

use std::fmt::Write as _;
use std::future::Future;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use lapin::message::BasicGetMessage;
use lapin::options::{
    BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use queuey_core::{BackendErrorKind, Envelope, Error};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// Every wait in these tests is bounded by this unless it says otherwise.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Awaits `f`, failing the test if it takes longer than [`WAIT`].
pub(crate) async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

/// The broker URL, or `None` (after a notice) when the tests should skip.
pub(crate) fn amqp_url(test: &str) -> Option<String> {
    match std::env::var("AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("QUEUEY_REQUIRE_BROKER").as_deref() == Ok("1") => {
            panic!(
                "{test}: AMQP_URL is not set but QUEUEY_REQUIRE_BROKER=1 requires the broker tests to run"
            )
        }
        _ => {
            // Straight to stderr, past the test harness's output capture, so
            // the skip is visible in a plain `cargo test`.
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

/// One test's view of the broker. Deletes every queue it named on drop,
/// even when the test panicked.
pub(crate) struct Broker {
    pub(crate) url: String,
    pub(crate) raw: Connection,
    id: String,
    queues: Mutex<Vec<String>>,
    exchanges: Mutex<Vec<String>>,
}

impl Broker {
    pub(crate) async fn new(test: &str) -> Option<Broker> {
        let url = amqp_url(test)?;
        install_log_capture();
        let id = uuid::Uuid::new_v4().simple().to_string();
        let props = ConnectionProperties::default()
            .with_connection_name(format!("queuey-test-raw-{id}").into());
        let raw = within("raw connect", Connection::connect(&url, props))
            .await
            .expect("raw connection to the test broker");
        let broker = Broker {
            url,
            raw,
            id,
            queues: Mutex::new(Vec::new()),
            exchanges: Mutex::new(Vec::new()),
        };
        let control = broker.control_stream();
        broker.track(&control);
        broker.track(&format!("{control}.workers"));
        Some(broker)
    }

    /// The control stream of this test's backends (and, with `.workers`,
    /// their heartbeat stream), tracked for cleanup: the shared broker's
    /// `queuey.control` is never touched.
    pub(crate) fn control_stream(&self) -> String {
        format!("queuey-test.control.{}", self.id)
    }

    /// `options` on this test's control stream, unless they name one.
    pub(crate) fn isolate(&self, options: RabbitMqOptions) -> RabbitMqOptions {
        #[cfg(feature = "fleet")]
        if options.settings().control_stream() == queuey_rabbitmq::topology::CONTROL_STREAM {
            return options.control_stream(self.control_stream());
        }
        options
    }

    /// A fresh queue name, tracked (with its `.dead` and `.suspect`
    /// companions) for cleanup.
    pub(crate) fn queue(&self, label: &str) -> String {
        let name = format!("queuey-test.{label}.{}", uuid::Uuid::new_v4().simple());
        self.track(&name);
        self.track(&format!("{name}.dead"));
        name
    }

    /// Tracks another queue name for cleanup; a work queue's suspect queue
    /// (`.suspect`, which `declare` creates with the poison guard on) with it.
    pub(crate) fn track(&self, name: &str) {
        let mut queues = self.queues.lock().unwrap();
        queues.push(name.to_owned());
        if is_work_queue(name) {
            queues.push(format!("{name}.suspect"));
        }
    }

    /// A fresh exchange name, deleted with the test's queues.
    pub(crate) fn exchange(&self, label: &str) -> String {
        let name = format!("queuey-test.{label}.{}", uuid::Uuid::new_v4().simple());
        self.exchanges.lock().unwrap().push(name.clone());
        name
    }

    /// A fresh stream name (for a control stream of the test's own),
    /// tracked for cleanup.
    #[cfg(feature = "fleet")]
    pub(crate) fn stream(&self, label: &str) -> String {
        let name = format!(
            "queuey-test.{label}.{}.stream",
            uuid::Uuid::new_v4().simple()
        );
        let mut queues = self.queues.lock().unwrap();
        queues.push(name.clone());
        queues.push(format!("{name}.workers"));
        name
    }

    /// The hold queue of `queue` for `ms` with the default (quorum) hold
    /// queues, tracked for cleanup.
    pub(crate) fn hold(&self, queue: &str, ms: u64) -> String {
        let name = format!("{queue}.deferred.quorum.{ms}");
        self.track(&name);
        name
    }

    /// The classic hold queue of `queue` for `ms`
    /// (`HoldQueues::Classic`), tracked for cleanup.
    pub(crate) fn classic_hold(&self, queue: &str, ms: u64) -> String {
        let name = format!("{queue}.deferred.{ms}");
        self.track(&name);
        name
    }

    /// A connection name unique to this test.
    pub(crate) fn connection_name(&self, label: &str) -> String {
        format!("queuey-test-{label}-{}", self.id)
    }

    /// A backend with its own uniquely named connection.
    pub(crate) async fn backend(&self, options: RabbitMqOptions) -> RabbitMqBackend {
        let options = self.isolate(options.connection_name(self.connection_name("backend")));
        within(
            "backend connect",
            RabbitMqBackend::with_options(&self.url, options),
        )
        .await
        .expect("backend connects")
    }

    /// A backend whose connection is named after `label` (unique to this
    /// test), for tests with several backends.
    pub(crate) async fn backend_named(
        &self,
        label: &str,
        options: RabbitMqOptions,
    ) -> RabbitMqBackend {
        let options = self.isolate(options.connection_name(self.connection_name(label)));
        within(
            "backend connect",
            RabbitMqBackend::with_options(&self.url, options),
        )
        .await
        .expect("backend connects")
    }

    pub(crate) async fn channel(&self) -> Channel {
        within("raw channel", self.raw.create_channel())
            .await
            .expect("raw channel")
    }

    /// A raw consumer of `queue` on a fresh channel with `prefetch`, and
    /// that channel (to close it, handing back what it holds).
    pub(crate) async fn consume_raw(
        &self,
        queue: &str,
        prefetch: u16,
        tag: &str,
    ) -> (Channel, lapin::Consumer) {
        let ch = self.channel().await;
        within(
            "raw qos",
            ch.basic_qos(prefetch, BasicQosOptions::default()),
        )
        .await
        .expect("raw qos");
        let consumer = within(
            "raw consume",
            ch.basic_consume(
                queue.into(),
                tag.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            ),
        )
        .await
        .expect("raw consume");
        (ch, consumer)
    }

    /// Declares a queue on a fresh raw channel.
    pub(crate) async fn declare_raw(
        &self,
        queue: &str,
        durable: bool,
        args: FieldTable,
    ) -> Result<(), lapin::Error> {
        let ch = self.channel().await;
        let opts = QueueDeclareOptions {
            durable,
            ..QueueDeclareOptions::default()
        };
        within("raw declare", ch.queue_declare(queue.into(), opts, args))
            .await
            .map(drop)
    }

    /// Ready messages on a queue (passive declare: use only on queues
    /// whose expiry does not matter).
    pub(crate) async fn ready(&self, queue: &str) -> u32 {
        let ch = self.channel().await;
        let opts = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        within(
            "passive declare",
            ch.queue_declare(queue.into(), opts, FieldTable::default()),
        )
        .await
        .unwrap_or_else(|e| panic!("queue `{queue}` should exist: {e}"))
        .message_count()
    }

    /// Whether the queue exists (a passive declare).
    pub(crate) async fn exists(&self, queue: &str) -> bool {
        let ch = self.channel().await;
        let opts = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        within(
            "passive declare",
            ch.queue_declare(queue.into(), opts, FieldTable::default()),
        )
        .await
        .is_ok()
    }

    /// Waits until `queue` has `n` ready messages.
    pub(crate) async fn wait_ready(&self, queue: &str, n: u32) {
        within(&format!("{n} ready on {queue}"), async {
            while self.ready(queue).await != n {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
    }

    /// Takes one message off a queue (auto-ack).
    pub(crate) async fn get(&self, queue: &str) -> Option<BasicGetMessage> {
        let ch = self.channel().await;
        within(
            "basic.get",
            ch.basic_get(queue.into(), BasicGetOptions { no_ack: true }),
        )
        .await
        .expect("basic.get")
    }

    /// Publishes raw bytes with a confirm.
    pub(crate) async fn publish_raw(&self, queue: &str, body: &[u8], props: BasicProperties) {
        let ch = self.channel().await;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirm mode");
        let confirm = within(
            "raw publish",
            ch.basic_publish(
                ShortString::default(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                props,
            ),
        )
        .await
        .expect("raw publish");
        assert!(
            within("raw confirm", confirm)
                .await
                .expect("raw confirm")
                .is_ack()
        );
    }

    /// Deletes a queue over the raw connection, as an operator would, and
    /// returns how many messages it held.
    pub(crate) async fn delete_raw(&self, queue: &str) -> u32 {
        let ch = self.channel().await;
        within(
            "queue.delete",
            ch.queue_delete(queue.into(), QueueDeleteOptions::default()),
        )
        .await
        .unwrap_or_else(|e| panic!("deleting `{queue}`: {e}"))
    }

    /// The names of all queues starting with `prefix`, as the broker lists
    /// them. Unlike a passive declare, listing renews no queue's lease.
    pub(crate) async fn queues_starting_with(&self, prefix: &str) -> Vec<String> {
        rabbitmqctl(&["list_queues", "name", "-q", "--no-table-headers"])
            .await
            .lines()
            .filter(|name| name.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    /// Ready and unacknowledged messages on `queue`, from the broker's
    /// listing (`None` if it is not listed).
    pub(crate) async fn ready_and_unacked(&self, queue: &str) -> Option<(u32, u32)> {
        let row = listed(queue, &["messages_ready", "messages_unacknowledged"]).await?;
        Some((row[0].parse().ok()?, row[1].parse().ok()?))
    }

    /// The broker's record of `queue`: `type\tdurable\targuments`, from its
    /// listing (which renews no lease), or `None` if it is not listed.
    pub(crate) async fn listed(&self, queue: &str) -> Option<String> {
        let listing = rabbitmqctl(&[
            "list_queues",
            "name",
            "type",
            "durable",
            "arguments",
            "-q",
            "--no-table-headers",
        ])
        .await;
        listing
            .lines()
            .find_map(|l| l.strip_prefix(queue)?.strip_prefix('\t').map(str::to_owned))
    }

    /// Runs `rabbitmqctl` with the arguments and returns its standard output.
    pub(crate) async fn rabbitmqctl(&self, args: &[&str]) -> String {
        rabbitmqctl(args).await
    }

    /// The broker's version as (major, minor), from `rabbitmqctl version`.
    pub(crate) async fn version(&self) -> (u32, u32) {
        let version = self.rabbitmqctl(&["version"]).await;
        let mut numbers = version
            .trim()
            .split('.')
            .map(|n| n.parse::<u32>().unwrap_or(0));
        (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
    }

    /// The broker's pid of the connection named `name` exactly, if it is
    /// open.
    pub(crate) async fn connection_pid(&self, name: &str) -> Option<String> {
        let list = rabbitmqctl(&[
            "list_connections",
            "pid",
            "client_properties",
            "-q",
            "--no-table-headers",
        ])
        .await;
        let named = format!("{{\"connection_name\",\"{name}\"}}");
        list.lines()
            .find(|l| l.contains(&named))
            .and_then(|l| l.split('\t').next())
            .map(str::to_owned)
    }

    /// Closes, from the broker's side, the connection named `name` (its
    /// `connection_name`, exactly: a backend's fleet connection is named
    /// `{name} (fleet)`); only ever our own.
    pub(crate) async fn close_connection(&self, name: &str) {
        let pid = self
            .connection_pid(name)
            .await
            .unwrap_or_else(|| panic!("no connection named {name}"));
        rabbitmqctl(&["close_connection", &pid, "queuey test: forced close"]).await;
    }
}

/// A policy on one test's hold queues only, cleared when dropped (also when
/// the test fails).
pub(crate) struct Policy {
    name: String,
}

impl Policy {
    /// Applies `definition` (policy JSON) to every hold queue of `q`.
    pub(crate) async fn on_holds(broker: &Broker, q: &str, definition: &str) -> Policy {
        let pattern = format!("^{}\\.deferred\\.", q.replace('.', "\\."));
        Policy::apply(broker, &pattern, definition).await
    }

    /// Applies `definition` (policy JSON) to queue `q` alone.
    pub(crate) async fn on_queue(broker: &Broker, q: &str, definition: &str) -> Policy {
        let pattern = format!("^{}$", q.replace('.', "\\."));
        Policy::apply(broker, &pattern, definition).await
    }

    async fn apply(broker: &Broker, pattern: &str, definition: &str) -> Policy {
        let name = format!("queuey-test-policy-{}", uuid::Uuid::new_v4().simple());
        broker
            .rabbitmqctl(&[
                "set_policy",
                "--apply-to",
                "queues",
                &name,
                pattern,
                definition,
            ])
            .await;
        Policy { name }
    }
}

impl Drop for Policy {
    fn drop(&mut self) {
        let _ = rabbitmqctl_command()
            .args(["clear_policy", &self.name])
            .output();
    }
}

/// Deletes a broker user of one test's own on drop, even after a panic.
pub(crate) struct DeleteUser(pub(crate) String);

impl Drop for DeleteUser {
    fn drop(&mut self) {
        let _ = rabbitmqctl_command()
            .args(["delete_user", &self.0])
            .output();
    }
}

impl Broker {
    /// The broker URL with other credentials.
    pub(crate) fn url_as(&self, user: &str, password: &str) -> String {
        let (scheme, rest) = self.url.split_once("://").expect("scheme://");
        let host_and_vhost = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
        format!("{scheme}://{user}:{password}@{host_and_vhost}")
    }
}

/// Every queue on the broker named `{tracked}` or `{tracked}.…` for one of
/// the tracked names: the hold (and suspect) queues a backend created for a
/// test's queues, which quorum holds never remove by themselves.
fn with_companions(tracked: Vec<String>) -> Vec<String> {
    let listing = rabbitmqctl_command()
        .args(["list_queues", "name", "-q", "--no-table-headers"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let mut all = tracked.clone();
    for name in listing.lines() {
        let derived = tracked.iter().any(|t| {
            name.strip_prefix(t.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
        });
        if derived && !all.iter().any(|a| a == name) {
            all.push(name.to_owned());
        }
    }
    all
}

impl Drop for Broker {
    fn drop(&mut self) {
        let tracked = std::mem::take(&mut *self.queues.lock().unwrap_or_else(|p| p.into_inner()));
        let queues = with_companions(tracked);
        let exchanges =
            std::mem::take(&mut *self.exchanges.lock().unwrap_or_else(|p| p.into_inner()));
        let url = self.url.clone();
        // A runtime of its own, so cleanup also runs after a panic.
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let props = ConnectionProperties::default()
                    .with_connection_name("queuey-test-cleanup".into());
                let Ok(conn) = Connection::connect(&url, props).await else {
                    return;
                };
                for exchange in exchanges {
                    if let Ok(ch) = conn.create_channel().await {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(5),
                            ch.exchange_delete(
                                exchange.as_str().into(),
                                lapin::options::ExchangeDeleteOptions::default(),
                            ),
                        )
                        .await;
                        let _ = ch.close(200, ShortString::default()).await;
                    }
                }
                for queue in queues {
                    if let Ok(ch) = conn.create_channel().await {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(5),
                            ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default()),
                        )
                        .await;
                        let _ = ch.close(200, ShortString::default()).await;
                    }
                }
                let _ = conn.close(200, ShortString::default()).await;
            });
        });
        let _ = cleanup.join();
    }
}

/// The `columns` of `queue` in the broker's listing (`rabbitmqctl
/// list_queues`, asked of the queues themselves, so never stale), or
/// `None` when it is not listed.
pub(crate) async fn listed(queue: &str, columns: &[&str]) -> Option<Vec<String>> {
    let mut args = vec!["list_queues", "name"];
    args.extend_from_slice(columns);
    args.extend(["-q", "--no-table-headers"]);
    rabbitmqctl(&args).await.lines().find_map(|line| {
        let mut fields = line.split('\t');
        (fields.next() == Some(queue)).then(|| fields.map(|f| f.trim().to_owned()).collect())
    })
}

/// A hold census for the tests: every job of a queue as `rabbitmqctl
/// list_queues messages` counts it (asked of the queue itself, so never
/// stale), those waiting to be dead-lettered included.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BrokerCensus;

impl queuey_rabbitmq::HoldCensus for BrokerCensus {
    fn jobs<'a>(
        &'a self,
        hold: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<u64>, Error>> {
        Box::pin(async move {
            Ok(listed(hold, &["messages"])
                .await
                .and_then(|row| row[0].parse().ok()))
        })
    }
}

/// Whether `name` looks like a work queue (not a dead-letter, suspect or
/// hold queue), which has a suspect queue.
pub(crate) fn is_work_queue(name: &str) -> bool {
    !(name.ends_with(".dead") || name.ends_with(".suspect") || name.contains(".deferred"))
}

/// `rabbitmqctl` for the broker behind `AMQP_URL`, ready for its
/// arguments. `QUEUEY_TEST_RABBITMQ_NODE` names that broker's node when it
/// is not the machine's default one (`-n NODE`); with
/// `QUEUEY_TEST_RABBITMQ_ROOT` too, the CLI is the one installed in that
/// Debian root, run inside it as its `rabbitmq` user (how CI reaches its
/// RabbitMQ 4.3 node, see `.ci/rabbitmq4.sh`).
pub(crate) fn rabbitmqctl_command() -> std::process::Command {
    let node = std::env::var("QUEUEY_TEST_RABBITMQ_NODE").unwrap_or_default();
    let root = std::env::var("QUEUEY_TEST_RABBITMQ_ROOT").unwrap_or_default();
    let mut command = if root.is_empty() {
        std::process::Command::new("rabbitmqctl")
    } else {
        assert!(
            !node.is_empty(),
            "QUEUEY_TEST_RABBITMQ_ROOT is set: set QUEUEY_TEST_RABBITMQ_NODE too, to the node behind AMQP_URL"
        );
        let mut command = std::process::Command::new("chroot");
        command.args([
            "--userspec=rabbitmq:rabbitmq",
            &root,
            "/usr/bin/env",
            "-i",
            "HOME=/var/lib/rabbitmq",
            "LANG=C.UTF-8",
            "LC_ALL=C.UTF-8",
            "PATH=/usr/lib/rabbitmq/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "rabbitmqctl",
        ]);
        command
    };
    if !node.is_empty() {
        command.args(["-n", &node]);
    }
    command
}

pub(crate) async fn rabbitmqctl(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let out = within(
        "rabbitmqctl",
        tokio::task::spawn_blocking(move || rabbitmqctl_command().args(&args).output()),
    )
    .await
    .expect("rabbitmqctl task")
    .expect("rabbitmqctl runs");
    assert!(
        out.status.success(),
        "rabbitmqctl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An envelope with a small JSON payload.
pub(crate) fn envelope(queue: &str, n: u32) -> Envelope {
    let payload = serde_json::value::to_raw_value(&serde_json::json!({ "n": n })).expect("payload");
    Envelope::new("test_job", queue, payload)
}

/// The payload's `n`.
pub(crate) fn n_of(envelope: &Envelope) -> u32 {
    envelope.payload_as::<serde_json::Value>().expect("payload")["n"]
        .as_u64()
        .expect("n") as u32
}

/// The kind of a backend error (panics for other errors).
pub(crate) fn kind(e: &Error) -> BackendErrorKind {
    match e {
        Error::Backend(b) => b.kind(),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

/// A field table with string arguments as long strings and integers as
/// 32-bit integers, built independently of the backend's own code.
pub(crate) fn table(entries: &[(&str, AMQPValue)]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in entries {
        t.insert((*k).into(), v.clone());
    }
    t
}

pub(crate) fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// A header's value as text (strings) or `i64:N` (integers).
pub(crate) fn header(msg: &BasicGetMessage, key: &str) -> Option<String> {
    let headers = msg.delivery.properties.headers().as_ref()?;
    headers.inner().get(key).map(|v| match v {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::LongLongInt(n) => format!("i64:{n}"),
        AMQPValue::LongInt(n) => format!("i32:{n}"),
        other => format!("{other:?}"),
    })
}

/// The queues named in a message's `x-death` header, in the broker's order
/// (most recent first): the queues it was dead-lettered from.
pub(crate) fn death_queues(msg: &BasicGetMessage) -> Vec<String> {
    let Some(headers) = msg.delivery.properties.headers().as_ref() else {
        return Vec::new();
    };
    let Some(AMQPValue::FieldArray(deaths)) = headers.inner().get("x-death") else {
        return Vec::new();
    };
    deaths
        .as_slice()
        .iter()
        .filter_map(|death| match death {
            AMQPValue::FieldTable(death) => match death.inner().get("queue") {
                Some(AMQPValue::LongString(queue)) => {
                    Some(String::from_utf8_lossy(queue.as_bytes()).into_owned())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

pub(crate) fn header_names(msg: &BasicGetMessage) -> Vec<String> {
    msg.delivery
        .properties
        .headers()
        .as_ref()
        .map(|h| h.inner().keys().map(|k| k.as_str().to_owned()).collect())
        .unwrap_or_default()
}

// ===== log capture =====

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static LEAKS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static FILTERED_LEAKS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static EVENTS: AtomicUsize = AtomicUsize::new(0);
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static MANAGEMENT_NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static CONTROL_NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Every event and span field of every test, at every level down to
/// trace, is checked against the registered secrets (twice: as every
/// subscriber would see it, and as one filtered with the directive the
/// backend documents, [`queuey_rabbitmq::SECRET_SAFE_LOG_DIRECTIVE`]).
pub(crate) fn install_log_capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::Layer as _;
        let documented = tracing_subscriber::EnvFilter::new(format!(
            "trace,{}",
            queuey_rabbitmq::SECRET_SAFE_LOG_DIRECTIVE
        ));
        let subscriber = tracing_subscriber::registry()
            .with(SecretScanner { filtered: false })
            .with(SecretScanner { filtered: true }.with_filter(documented));
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Registers a secret that must never appear in any log line, as text or
/// as its bytes (see [`secret_forms`]).
pub(crate) fn watch_secret(secret: &str) {
    let mut secrets = SECRETS.lock().unwrap();
    secrets.extend(secret_forms(secret));
}

/// The forms a secret takes in a log line: the text itself; its bytes as
/// `Debug` prints a byte buffer (`[83, 51, 99]`, how lapin's trace log
/// shows the login frame); and its bytes in hex, lower and upper case.
pub(crate) fn secret_forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let decimal = bytes
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let spaced_hex = bytes
        .iter()
        .map(|b| format!("0x{b:02x}"))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        secret.to_owned(),
        decimal,
        hex.clone(),
        hex.to_uppercase(),
        spaced_hex,
    ]
}

/// Log lines that contained a registered secret, and how many events were seen.
pub(crate) fn log_leaks() -> (Vec<String>, usize) {
    (
        LEAKS.lock().unwrap().clone(),
        EVENTS.load(Ordering::Relaxed),
    )
}

/// Log lines that contained a registered secret although they passed the
/// documented filter directive.
pub(crate) fn filtered_log_leaks() -> Vec<String> {
    FILTERED_LEAKS.lock().unwrap().clone()
}

/// The lines of `log` so far, from any test, that mention `needle` (a
/// queue name with its UUID picks out one test's lines).
fn mentioning(log: &Mutex<Vec<String>>, needle: &str) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains(needle))
        .cloned()
        .collect()
}

/// Every warning and error queuey logged so far that mentions `needle`.
pub(crate) fn warnings_mentioning(needle: &str) -> Vec<String> {
    mentioning(&WARNINGS, needle)
}

/// Every info or debug line of the poison guard so far that mentions
/// `needle`.
pub(crate) fn guard_notices_mentioning(needle: &str) -> Vec<String> {
    mentioning(&NOTICES, needle)
}

/// Every info line of the management API's client so far that mentions
/// `needle`.
#[cfg_attr(not(feature = "management"), allow(dead_code))]
pub(crate) fn management_notices_mentioning(needle: &str) -> Vec<String> {
    mentioning(&MANAGEMENT_NOTICES, needle)
}

/// Every line of the control plane so far, down to debug, that mentions
/// `needle` (a test's own control stream picks out its lines).
#[cfg(feature = "fleet")]
pub(crate) fn control_notices_mentioning(needle: &str) -> Vec<String> {
    mentioning(&CONTROL_NOTICES, needle)
}

/// Scans what it sees for secrets: everything (`filtered: false`), or
/// what passed the documented filter directive.
struct SecretScanner {
    filtered: bool,
}

struct Collect(String);

impl Visit for Collect {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
}

impl SecretScanner {
    fn scan(&self, line: &str) {
        let secrets = SECRETS.lock().unwrap();
        if secrets.iter().any(|s| line.contains(s.as_str())) {
            let leaks = if self.filtered {
                &FILTERED_LEAKS
            } else {
                &LEAKS
            };
            leaks.lock().unwrap().push(line.to_owned());
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SecretScanner {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let level = *event.metadata().level();
        let mut line = Collect(format!("{level} {}", event.metadata().target()));
        event.record(&mut line);
        self.scan(&line.0);
        if self.filtered {
            return;
        }
        EVENTS.fetch_add(1, Ordering::Relaxed);
        // Warnings and errors of queuey's own crates (more verbose levels
        // compare greater), not the AMQP client's.
        let target = event.metadata().target();
        if level <= tracing::Level::WARN && target.starts_with("queuey") {
            WARNINGS.lock().unwrap().push(line.0);
        } else if (level == tracing::Level::INFO || level == tracing::Level::DEBUG)
            && target.starts_with("queuey_rabbitmq::consumer::guard")
        {
            NOTICES.lock().unwrap().push(line.0);
        } else if level == tracing::Level::INFO && target.starts_with("queuey_rabbitmq::management")
        {
            MANAGEMENT_NOTICES.lock().unwrap().push(line.0);
        } else if level <= tracing::Level::DEBUG
            && target.starts_with("queuey_rabbitmq::fleet::control")
        {
            CONTROL_NOTICES.lock().unwrap().push(line.0);
        }
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: Context<'_, S>,
    ) {
        let mut line = Collect(attrs.metadata().name().to_owned());
        attrs.record(&mut line);
        self.scan(&line.0);
    }

    fn on_record(
        &self,
        _: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: Context<'_, S>,
    ) {
        let mut line = Collect(String::new());
        values.record(&mut line);
        self.scan(&line.0);
    }
}
