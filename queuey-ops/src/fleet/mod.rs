//! The running fleet: its workers (from their heartbeats) and the control
//! commands that pause and resume queues and cancel jobs.
//!
//! Everything goes through the library's own RabbitMQ backend, so the tool
//! and the dashboard send exactly what
//! [`Producer::cancel`](queuey_core::Producer::cancel) and its siblings send,
//! and read the same state a worker reads.
//!
//! ```no_run
//! use queuey_ops::fleet::Fleet;
//! use queuey_ops::TlsFiles;
//! use queuey_core::control::Command;
//!
//! # async fn run() -> queuey_ops::Result<()> {
//! let fleet = Fleet::connect("amqp://guest:guest@127.0.0.1:5672/%2f", &TlsFiles::default(), "ops-example").await?;
//! for worker in fleet.workers().await? {
//!     println!("{}:{} runs {} jobs", worker.host, worker.pid, worker.running.len());
//! }
//! fleet.send(Command::Pause { queue: "app.emails".into() }, "ops-example").await?;
//! fleet.close().await;
//! # Ok(()) }
//! ```

mod history;

use std::time::Duration;

use queuey_core::backend::Backend;
use queuey_core::control::{Command, ControlRecord, ControlState, Heartbeat, RunningJob};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::error::{OpsError, Result};
use crate::tls::TlsFiles;

pub use history::{Counts, History, MINUTES};

/// A connection to the fleet's control plane.
#[derive(Debug, Clone)]
pub struct Fleet {
    backend: RabbitMqBackend,
}

impl Fleet {
    /// Connects to `url` (an `amqps://` URL with `tls`), naming the
    /// connection `name`. The first connection is not retried: an operator
    /// tool should say at once that the broker is unreachable.
    pub async fn connect(url: &str, tls: &TlsFiles, name: &str) -> Result<Fleet> {
        Fleet::connect_to(url, tls, name, queuey_rabbitmq::topology::CONTROL_STREAM).await
    }

    /// Like [`connect`](Fleet::connect), for a fleet whose processes use
    /// another control stream (`RabbitMqOptions::control_stream`).
    pub async fn connect_to(
        url: &str,
        tls: &TlsFiles,
        name: &str,
        control_stream: &str,
    ) -> Result<Fleet> {
        let options = RabbitMqOptions::default().control_stream(control_stream);
        let backend = crate::amqp::backend(url, tls, name, options).await?;
        Ok(Fleet { backend })
    }

    /// A fleet over a backend already connected.
    pub fn from_backend(backend: RabbitMqBackend) -> Fleet {
        Fleet { backend }
    }

    /// Sends `command`, signed `by`; returns the record sent.
    pub async fn send(&self, command: Command, by: &str) -> Result<ControlRecord> {
        let record = ControlRecord::new(command).by(by);
        self.backend
            .send_control(&record)
            .await
            .map_err(|source| OpsError::Fleet {
                what: format!("sending the `{}` command", record.command.as_str()),
                source,
            })?;
        Ok(record)
    }

    /// The control state: every command sent so far, applied.
    pub async fn state(&self) -> Result<ControlState> {
        let view = self
            .backend
            .follow_control()
            .await
            .map_err(|source| OpsError::Fleet {
                what: "reading the control commands".to_owned(),
                source,
            })?;
        Ok(view.map(|v| v.snapshot()).unwrap_or_default())
    }

    /// The workers heard from recently, oldest first.
    pub async fn workers(&self) -> Result<Vec<Heartbeat>> {
        self.backend
            .workers()
            .await
            .map_err(|source| OpsError::Fleet {
                what: "reading the workers' heartbeats".to_owned(),
                source,
            })
    }

    /// Closes the connection.
    pub async fn close(&self) {
        let _ = self.backend.close().await;
    }
}

/// Who the tool says sent a command: `queuey` with the user and host.
pub fn signature(tool: &str) -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    format!("{tool} ({user})")
}

/// A worker's label: `host:pid`.
pub fn label(beat: &Heartbeat) -> String {
    format!("{}:{}", beat.host, beat.pid)
}

/// The running jobs of `workers` that match, with their worker.
pub fn running_where<'a>(
    workers: &'a [Heartbeat],
    mut matches: impl FnMut(&RunningJob) -> bool + 'a,
) -> impl Iterator<Item = (&'a Heartbeat, &'a RunningJob)> + 'a {
    workers
        .iter()
        .flat_map(|w| w.running.iter().map(move |j| (w, j)))
        .filter(move |(_, j)| matches(j))
}

/// How long `job` has run at the time of its worker's heartbeat.
pub fn running_for(worker: &Heartbeat, job: &RunningJob) -> Duration {
    Duration::from_millis(worker.at_ms.saturating_sub(job.started_at_ms))
}
