//! The test harness: broker address, unique names, cleanup, dead letters
//! made by the real backend, and the `queuey` binary.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeleteOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use queuey_core::backend::Backend;
use queuey_core::{Envelope, QueueConfig};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::Amqp;

/// Every wait in these tests is bounded by this.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Awaits `f`, failing the test if it takes longer than [`WAIT`].
pub(crate) async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

/// The broker URL, or `None` (after a notice) when the test should skip.
pub(crate) fn amqp_url(test: &str) -> Option<String> {
    match std::env::var("AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("QUEUEY_REQUIRE_BROKER").as_deref() == Ok("1") => {
            panic!("{test}: AMQP_URL is not set but QUEUEY_REQUIRE_BROKER=1 requires it")
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

macro_rules! harness {
    ($name:expr) => {
        match $crate::tests::support::Harness::new($name).await {
            Some(h) => h,
            None => return,
        }
    };
}
pub(crate) use harness;

/// One test's view of the broker; deletes every queue it named on drop.
pub(crate) struct Harness {
    pub(crate) url: String,
    pub(crate) amqp: Amqp,
    id: String,
    queues: Mutex<Vec<String>>,
}

impl Harness {
    pub(crate) async fn new(test: &str) -> Option<Harness> {
        let url = amqp_url(test)?;
        let name = format!("queuey-ops-test-{test}-{}", uuid::Uuid::new_v4().simple());
        let amqp = within("connect", Amqp::connect(&url, &name))
            .await
            .expect("the test broker answers");
        let harness = Harness {
            url,
            amqp,
            id: uuid::Uuid::new_v4().simple().to_string(),
            queues: Mutex::new(Vec::new()),
        };
        let control = harness.control_stream();
        harness.track(&format!("{control}.workers"));
        harness.track(&control);
        Some(harness)
    }

    /// A dashboard's configuration for this test's broker, on this test's
    /// control stream.
    pub(crate) fn web_config(&self) -> crate::web::WebConfig {
        let mut config = crate::web::WebConfig::new(self.url.clone());
        config.control_stream = self.control_stream();
        config
    }

    /// The control stream of this test's commands, deleted at the end (with
    /// its heartbeat stream).
    pub(crate) fn control_stream(&self) -> String {
        format!("queuey-ops-test.control.{}", self.id)
    }

    /// A fresh work queue name, tracked with its dead-letter queue.
    pub(crate) fn queue(&self, label: &str) -> String {
        let name = format!("queuey-ops-test.{label}.{}", uuid::Uuid::new_v4().simple());
        self.track(&name);
        self.track(&format!("{name}.dead"));
        self.track(&format!("{name}.suspect"));
        name
    }

    /// A fresh sharded queue's name, tracked with its lane's and each of
    /// its `shards` shards' dead-letter and suspect queues (hold queues are
    /// tracked by the tests that make them).
    pub(crate) fn sharded_queue(&self, label: &str, shards: u16) -> String {
        let name = self.queue(label);
        for index in 0..shards {
            let shard = format!("{name}.s{index}");
            self.track(&shard);
            self.track(&format!("{shard}.dead"));
            self.track(&format!("{shard}.suspect"));
        }
        name
    }

    /// A backend on its own named connection, with `queue` declared
    /// sharded over `shards` broker queues besides its lane.
    pub(crate) async fn sharded_backend(
        &self,
        queue: &str,
        shards: u16,
    ) -> (RabbitMqBackend, QueueConfig) {
        self.declared(QueueConfig::new(queue).shards(shards)).await
    }

    /// Tracks another queue for deletion.
    pub(crate) fn track(&self, name: &str) {
        self.queues.lock().unwrap().push(name.to_owned());
    }

    /// A backend on its own named connection, with `queue` declared.
    pub(crate) async fn backend(&self, queue: &str) -> (RabbitMqBackend, QueueConfig) {
        self.declared(QueueConfig::new(queue)).await
    }

    /// A backend on its own named connection, with `config` declared.
    async fn declared(&self, config: QueueConfig) -> (RabbitMqBackend, QueueConfig) {
        // Whole seconds, so that a test knows which hold queue a delay uses.
        let options = RabbitMqOptions::default()
            .connection_name(format!("queuey-ops-test-backend-{}", config.name()))
            .retry_granularity(Duration::from_secs(1));
        let backend = within("backend", RabbitMqBackend::with_options(&self.url, options))
            .await
            .expect("backend connects");
        within("declare", backend.declare(std::slice::from_ref(&config)))
            .await
            .expect("declare");
        (backend, config)
    }

    /// Messages ready on `queue`.
    pub(crate) async fn ready(&self, queue: &str) -> u32 {
        within("count", self.amqp.require(queue))
            .await
            .unwrap_or_else(|e| panic!("{queue}: {e}"))
            .messages
    }

    /// Runs the `queuey` binary with `args` against the test broker, on this
    /// test's control stream.
    pub(crate) fn cli(&self, args: &[&str]) -> Output {
        queuey(&self.url, args)
            .env("QUEUEY_CONTROL_STREAM", self.control_stream())
            .output()
            .expect("the queuey binary runs")
    }

    /// Publishes raw bytes to `queue`, confirmed.
    pub(crate) async fn publish_raw(&self, queue: &str, body: &[u8], props: BasicProperties) {
        let ch = self.amqp.channel().await.expect("channel");
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let confirm = ch
            .basic_publish(
                ShortString::default(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
        assert!(confirm.is_ack());
        let _ = ch.close(200, ShortString::default()).await;
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let queues = std::mem::take(&mut *self.queues.lock().unwrap_or_else(|p| p.into_inner()));
        delete_queues(&self.url, queues);
    }
}

/// Deletes `queues` on the broker at `url`, on a runtime of its own, so
/// that cleanup also runs after a panic.
fn delete_queues(url: &str, queues: Vec<String>) {
    {
        let url = url.to_owned();
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let props = ConnectionProperties::default()
                    .with_connection_name("queuey-ops-test-cleanup".into());
                let Ok(conn) = Connection::connect(&url, props).await else {
                    return;
                };
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

/// Cargo's output folder, `target/debug/`: the one above this test
/// binary's (`target/debug/deps/`).
pub(crate) fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary is in a folder of a folder")
        .to_owned()
}

/// The `queuey` binary cargo built, in [`target_dir`].
pub(crate) fn queuey_bin() -> PathBuf {
    let bin = target_dir().join(format!("queuey{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "no queuey binary at {}: `cargo test -p queuey-ops` builds it; with `--bin queuey` \
         alone, run `cargo build -p queuey-ops` first",
        bin.display()
    );
    bin
}

/// The `queuey` binary with `args`, against `url` and the management API
/// it finds from there.
fn queuey(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(queuey_bin());
    command
        .args(args)
        .env("AMQP_URL", url)
        .env_remove("QUEUEY_MGMT_URL");
    command
}

/// Runs the `queuey` binary with `args` against `url`.
pub(crate) fn cli_with(url: &str, args: &[&str]) -> Output {
    queuey(url, args).output().expect("the queuey binary runs")
}

/// Stdout of a run that must have succeeded.
pub(crate) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "queuey failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stdout of a run that printed JSON, parsed.
pub(crate) fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).expect("queuey printed JSON")
}

/// `dead stats --json`'s groups: fingerprint → count.
pub(crate) fn fingerprint_counts(
    stats: &serde_json::Value,
) -> std::collections::BTreeMap<String, u64> {
    stats["by_fingerprint"]
        .as_array()
        .expect("by_fingerprint")
        .iter()
        .map(|g| {
            (
                g["fingerprint"].as_str().unwrap().to_owned(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A dead letter the test made: its job id, type and reason.
#[derive(Debug, Clone)]
pub(crate) struct Made {
    pub(crate) job_id: uuid::Uuid,
    pub(crate) job_type: String,
    pub(crate) reason: String,
}

/// Publishes `jobs` as envelopes on `queue` and dead-letters each through
/// the real backend with its reason, in order.
pub(crate) async fn dead_letter_jobs(
    backend: &RabbitMqBackend,
    config: &QueueConfig,
    jobs: &[(String, String, serde_json::Value)],
) -> Vec<Made> {
    let mut made = Vec::new();
    for (job_type, reason, payload) in jobs {
        let raw = serde_json::value::to_raw_value(payload).unwrap();
        let env = Envelope::new(job_type.clone(), config.name(), raw);
        within("publish", backend.publish(&env))
            .await
            .expect("publish");
        made.push(Made {
            job_id: env.job_id,
            job_type: job_type.clone(),
            reason: reason.clone(),
        });
    }
    let mut stream = within("consume", backend.consume(config))
        .await
        .expect("consume");
    for m in &made {
        let delivery = within("delivery", stream.next())
            .await
            .expect("a delivery")
            .expect("delivery ok");
        assert_eq!(delivery.envelope().job_id, m.job_id, "FIFO order");
        let dead = queuey_core::Disposition::DeadLetter {
            reason: m.reason.clone(),
        };
        within("dead-letter", delivery.settle(dead))
            .await
            .expect("dead-lettered");
    }
    drop(stream);
    made
}

/// Takes every job now on `queue` through the backend, acking each; returns
/// their ids. Waits until `n` arrived, then until the queue stays empty.
pub(crate) async fn process_all(
    backend: &RabbitMqBackend,
    config: &QueueConfig,
    n: usize,
) -> Vec<(uuid::Uuid, u32)> {
    let mut stream = within("consume", backend.consume(config))
        .await
        .expect("consume");
    let mut seen = Vec::new();
    while seen.len() < n {
        let d = within("delivery", stream.next())
            .await
            .expect("a delivery")
            .expect("delivery ok");
        seen.push((d.envelope().job_id, d.envelope().attempt));
        within("ack", d.ack()).await.expect("ack");
    }
    // Anything more (a duplicate) would arrive now.
    if let Ok(Some(Ok(d))) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
        seen.push((d.envelope().job_id, d.envelope().attempt));
        let _ = d.ack().await;
    }
    seen
}
