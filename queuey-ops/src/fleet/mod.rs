//! The running fleet: its workers (from their heartbeats) and the control
//! commands, sent and read through the library's own backend.

mod history;
mod shown;
mod unheard;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use queuey_core::backend::{ControlChannel, Heartbeats};
use queuey_core::control::{
    Command, ControlRecord, ControlState, ControlView, Heartbeat, LimitSeen, RunningJob,
};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use tokio::sync::Mutex;

use crate::error::{OpsError, Result};
use crate::tls::TlsFiles;

pub(crate) use history::{Counts, History};
pub(crate) use shown::{consumers_of, running_line};
pub(crate) use unheard::Unheard;

/// A connection to the fleet's control plane. The control state is
/// followed from the first [`state`](Fleet::state) on, and caught up again
/// only after this fleet sent a command.
#[derive(Debug, Clone)]
pub(crate) struct Fleet {
    backend: RabbitMqBackend,
    view: Arc<Mutex<Option<ControlView>>>,
    /// Set when a command was sent since the state was last caught up.
    sent: Arc<AtomicBool>,
}

/// Whom the tool trusts besides its own user: other operators' commands,
/// the workers' heartbeats and states, and its certificate login's user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Trust {
    pub(crate) control_senders: Vec<String>,
    pub(crate) worker_senders: Vec<String>,
    pub(crate) authenticated_user: Option<String>,
}

impl Trust {
    fn apply(&self, mut options: RabbitMqOptions) -> RabbitMqOptions {
        options = options
            .control_senders(self.control_senders.iter().cloned())
            .worker_senders(self.worker_senders.iter().cloned());
        if let Some(user) = &self.authenticated_user {
            options = options.authenticated_user(user.clone());
        }
        options
    }
}

impl Fleet {
    /// Connects to `url` as `name` on `control_stream`, without retrying.
    pub(crate) async fn connect_with(
        url: &str,
        tls: &TlsFiles,
        name: &str,
        control_stream: &str,
        trust: &Trust,
    ) -> Result<Fleet> {
        let options = trust.apply(RabbitMqOptions::default().control_stream(control_stream));
        let backend = crate::amqp::backend(url, tls, name, options).await?;
        Ok(Fleet {
            backend,
            view: Arc::default(),
            sent: Arc::default(),
        })
    }

    /// Sends `command`, signed by the backend; returns the record sent.
    pub(crate) async fn send(&self, command: Command) -> Result<ControlRecord> {
        let record = ControlRecord::new(command);
        self.backend.send_control(&record).await.map_err(|e| {
            OpsError::fleet(
                format!("sending the `{}` command", record.command.as_str()),
                e,
            )
        })?;
        self.sent.store(true, Ordering::Release);
        Ok(record)
    }

    /// The control state, every command sent so far applied; fails when it
    /// could not catch up in time.
    pub(crate) async fn state(&self) -> Result<ControlState> {
        let mut followed = self.view.lock().await;
        let view = match followed.take() {
            Some(view) if !self.sent.swap(false, Ordering::AcqRel) => view,
            _ => self
                .backend
                .follow_control()
                .await
                .map_err(|e| OpsError::fleet("reading the control commands", e))?,
        };
        let view = followed.insert(view);
        if !view.is_caught_up() {
            return Err(OpsError::Refused(
                "the control stream could not be read to its end in time, so the fleet's state \
                 is not known yet (RabbitMQ is slow, or the stream holds a great many records); \
                 try again in a moment"
                    .to_owned(),
            ));
        }
        Ok(view.snapshot())
    }

    /// The workers heard from recently, oldest first.
    pub(crate) async fn workers(&self) -> Result<Vec<Heartbeat>> {
        self.backend
            .workers()
            .await
            .map_err(|e| OpsError::fleet("reading the workers' heartbeats", e))
    }

    /// Whether `user_id` is trusted as a worker.
    pub(crate) fn trusts_worker(&self, user_id: Option<&str>) -> bool {
        self.backend.trusts_worker(user_id)
    }

    pub(crate) async fn close(&self) {
        let _ = self.backend.close().await;
    }
}

/// A worker's label: its connection's name, if any, and `host:pid`.
pub(crate) fn label(beat: &Heartbeat) -> String {
    match &beat.name {
        Some(name) => format!("{name} ({}:{})", beat.host, beat.pid),
        None => format!("{}:{}", beat.host, beat.pid),
    }
}

/// The running jobs of `workers` that match, with their worker.
pub(crate) fn running_where<'a>(
    workers: &'a [Heartbeat],
    mut matches: impl FnMut(&RunningJob) -> bool + 'a,
) -> impl Iterator<Item = (&'a Heartbeat, &'a RunningJob)> + 'a {
    workers
        .iter()
        .flat_map(|w| w.running.iter().map(move |j| (w, j)))
        .filter(move |(_, j)| matches(j))
}

/// How many jobs of each tenant run, per queue: `(tenant, queue, running)`,
/// busiest first, from the running jobs of `workers` that match and name a
/// tenant.
pub(crate) fn running_by_tenant<'a>(
    workers: &'a [Heartbeat],
    matches: impl FnMut(&RunningJob) -> bool + 'a,
) -> Vec<(&'a str, &'a str, usize)> {
    let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (_, job) in running_where(workers, matches) {
        if let Some(tenant) = &job.tenant {
            *counts.entry((tenant, &job.queue)).or_default() += 1;
        }
    }
    let mut rows: Vec<_> = counts
        .into_iter()
        .map(|((tenant, queue), running)| (tenant, queue, running))
        .collect();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(a.cmp(b)));
    rows
}

/// The fleet's per-key limits, from the processes' heartbeats: per limit
/// and key, the slots held now (summed over processes; the workers of one
/// process report the same book, counted once), the jobs waiting for a
/// slot as the store last said, and the waits told, busiest first.
pub(crate) fn limits_by_key(workers: &[Heartbeat]) -> Vec<LimitSeen> {
    let mut processes: Vec<(&str, u32)> = Vec::new();
    let mut keys: BTreeMap<(&str, &str), LimitSeen> = BTreeMap::new();
    for worker in workers {
        if processes.contains(&(worker.host.as_str(), worker.pid)) {
            continue;
        }
        processes.push((&worker.host, worker.pid));
        for seen in &worker.limits {
            let entry = keys
                .entry((&seen.name, &seen.key))
                .or_insert_with(|| LimitSeen {
                    running: 0,
                    waiting: 0,
                    waits: 0,
                    ..seen.clone()
                });
            entry.running += seen.running;
            entry.waiting = entry.waiting.max(seen.waiting);
            entry.waits += seen.waits;
        }
    }
    let mut listed: Vec<LimitSeen> = keys.into_values().collect();
    listed.sort_by_key(|seen| std::cmp::Reverse((seen.running, seen.waiting)));
    listed
}

/// How long `job` has run at the time of its worker's heartbeat.
pub(crate) fn running_for(worker: &Heartbeat, job: &RunningJob) -> Duration {
    Duration::from_millis(worker.at_ms.saturating_sub(job.started_at_ms))
}
