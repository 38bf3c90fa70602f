//! The parent's own AMQP connection: backlogs read with a passive declare,
//! shards purged between phases, and the run's queues deleted at the end.

use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions, QueuePurgeOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};

use crate::BenchResult;

/// How long one broker operation may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The admin connection.
pub(crate) struct Admin(Connection);

impl Admin {
    pub(crate) async fn connect(url: &str, name: &str) -> BenchResult<Admin> {
        let properties = ConnectionProperties::default().with_connection_name(name.into());
        let connection = bounded("connecting", Connection::connect(url, properties)).await??;
        Ok(Admin(connection))
    }

    /// Jobs ready in `queue` (not those delivered and unacknowledged).
    pub(crate) async fn backlog(&self, queue: &str) -> BenchResult<u32> {
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = self
            .on_channel("reading a backlog", |ch| async move {
                ch.queue_declare(queue.into(), options, FieldTable::default())
                    .await
            })
            .await?;
        Ok(declared
            .map_err(|e| format!("reading the backlog of {queue}: {e}"))?
            .message_count())
    }

    /// Drops every ready job of `queue`.
    pub(crate) async fn purge(&self, queue: &str) -> BenchResult<u32> {
        let purged = self
            .on_channel("purging a queue", |ch| async move {
                ch.queue_purge(queue.into(), QueuePurgeOptions::default())
                    .await
            })
            .await?;
        Ok(purged.map_err(|e| format!("purging {queue}: {e}"))?)
    }

    /// Deletes `queues`, messages and all; one already gone counts as
    /// deleted. Tries every queue, then reports those that failed.
    pub(crate) async fn delete(&self, queues: &[String]) -> BenchResult<()> {
        let mut failed = Vec::new();
        for queue in queues {
            let why = match self
                .on_channel("deleting a queue", |ch| async move {
                    ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                        .await
                })
                .await
            {
                Ok(Err(e)) if !is_not_found(&e) => e.to_string(),
                Ok(_) => continue,
                Err(e) => e.to_string(),
            };
            failed.push(format!("{queue}: {why}"));
        }
        match failed.as_slice() {
            [] => Ok(()),
            failed => Err(format!("could not delete: {}", failed.join("; ")).into()),
        }
    }

    pub(crate) async fn close(&self) {
        let _ = self.0.close(200, "benchmark done".into()).await;
    }

    /// Runs `operation` on a fresh channel (a refusal closes the channel
    /// it ran on), bounded by [`TIMEOUT`]: the broker's answer, or why
    /// none came.
    async fn on_channel<T, F>(
        &self,
        what: &str,
        operation: impl FnOnce(Channel) -> F,
    ) -> BenchResult<Result<T, lapin::Error>>
    where
        F: Future<Output = Result<T, lapin::Error>>,
    {
        let channel = self.0.create_channel().await?;
        let answer = bounded(what, operation(channel.clone())).await?;
        if channel.status().connected() {
            let _ = channel.close(200, "done".into()).await;
        }
        Ok(answer)
    }
}

/// Awaits `future` for at most [`TIMEOUT`].
async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> BenchResult<T> {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .map_err(|_| format!("{what}: no answer from the broker in {TIMEOUT:?}").into())
}

fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp) if amqp.get_id() == 404)
}

/// The run's queues still on the broker: those named `prefix...` that
/// `rabbitmqctl list_queues` lists in `vhost`; `None` when `rabbitmqctl`
/// cannot reach the broker from here.
pub(crate) async fn left_behind(vhost: &str, prefix: &str) -> Option<Vec<String>> {
    let output = tokio::process::Command::new("rabbitmqctl")
        .args([
            "-q",
            "-p",
            vhost,
            "list_queues",
            "name",
            "--no-table-headers",
        ])
        .output()
        .await
        .ok()?;
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::trim)
            .filter(|name| name.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    })
}
