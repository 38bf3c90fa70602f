//! The worker's heartbeat: what it runs and has done, sent to the backend
//! every few seconds for the fleet's operators.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::__private::now_ms;
use queuey_core::backend::Backend;
use queuey_core::control::{Heartbeat, ProgressReporter, QueueTotals, RunningJob};
use queuey_core::{Envelope, Uuid};
use tokio::sync::watch;

use super::fnv::Fnv1a;
use super::handle::{HandleInner, stopped};
use crate::lock;

/// What the worker's heartbeats report: its running jobs and its totals.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Each start gets the next key: cheaper than an id drawn at random,
    /// and two deliveries of one job running at once stay apart.
    next: AtomicU64,
    running: Mutex<HashMap<u64, Running, BuildHasherDefault<Fnv1a>>>,
    /// One tally per queue, each counted by its queue's jobs without a
    /// lock.
    tallies: Mutex<Vec<Arc<Tally>>>,
}

/// What one queue's jobs were settled as.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    queue: Arc<str>,
    finished: AtomicU64,
    retried: AtomicU64,
    deferred: AtomicU64,
    dead_lettered: AtomicU64,
}

impl Tally {
    /// Whether this is `queue`'s tally.
    pub(crate) fn is_of(&self, queue: &Arc<str>) -> bool {
        Arc::ptr_eq(&self.queue, queue) || self.queue == *queue
    }

    /// A job was settled with the disposition named `what`
    /// (`Disposition::as_str`).
    pub(crate) fn settled(&self, what: &str) {
        let count = match what {
            "ack" => &self.finished,
            "retry" => &self.retried,
            "defer" => &self.deferred,
            "dead_letter" => &self.dead_lettered,
            _ => return,
        };
        count.fetch_add(1, Ordering::Relaxed);
    }

    /// The totals, unless nothing was settled yet.
    fn totals(&self) -> Option<QueueTotals> {
        let totals = QueueTotals {
            queue: self.queue.to_string(),
            finished: self.finished.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            deferred: self.deferred.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
        };
        let any = totals.finished + totals.retried + totals.deferred + totals.dead_lettered > 0;
        any.then_some(totals)
    }
}

/// A running job as the ledger keeps it: nothing copied but the id (and
/// the tenant, when it names one).
#[derive(Debug)]
struct Running {
    job_id: Uuid,
    job_type: &'static str,
    queue: Arc<str>,
    attempt: u32,
    started_at_ms: u64,
    /// Where its handler reports its progress.
    progress: ProgressReporter,
    tenant: Option<String>,
}

impl Ledger {
    /// A job of the type `job_type` started, reporting its progress on
    /// `progress`; returns the key to
    /// [`finished`](Ledger::finished).
    pub(crate) fn started(
        &self,
        envelope: &Envelope,
        job_type: &'static str,
        queue: &Arc<str>,
        progress: ProgressReporter,
    ) -> u64 {
        let job = Running {
            job_id: envelope.job_id,
            job_type,
            queue: Arc::clone(queue),
            attempt: envelope.attempt,
            started_at_ms: now_ms(),
            progress,
            tenant: envelope.tenant.clone(),
        };
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.running).insert(key, job);
        key
    }

    /// The job started under `key` stopped running.
    pub(crate) fn finished(&self, key: u64) {
        lock(&self.running).remove(&key);
    }

    /// The tally of `queue`'s settles, the same for every caller.
    pub(crate) fn tally(&self, queue: &Arc<str>) -> Arc<Tally> {
        let mut tallies = lock(&self.tallies);
        if let Some(tally) = tallies.iter().find(|tally| tally.queue == *queue) {
            return Arc::clone(tally);
        }
        let tally = Arc::new(Tally {
            queue: Arc::clone(queue),
            ..Tally::default()
        });
        tallies.push(Arc::clone(&tally));
        tally
    }

    fn running(&self) -> Vec<RunningJob> {
        let mut running: Vec<RunningJob> = lock(&self.running)
            .values()
            .map(|job| RunningJob {
                job_id: job.job_id,
                job_type: job.job_type.to_owned(),
                queue: job.queue.to_string(),
                attempt: job.attempt,
                started_at_ms: job.started_at_ms,
                progress: job.progress.latest(),
                tenant: job.tenant.clone(),
            })
            .collect();
        running.sort_by_key(|job| (job.started_at_ms, job.job_id));
        running.truncate(queuey_core::control::MAX_RUNNING_LISTED);
        running
    }

    /// The queues' totals, by name, leaving out a queue nothing was
    /// settled of yet.
    fn totals(&self) -> Vec<QueueTotals> {
        let mut totals: Vec<QueueTotals> = lock(&self.tallies)
            .iter()
            .filter_map(|tally| tally.totals())
            .collect();
        totals.sort_by(|a, b| a.queue.cmp(&b.queue));
        totals
    }
}

/// Who the worker is, fixed for its life.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) worker_id: Uuid,
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) queues: Vec<String>,
    pub(crate) concurrency: usize,
    pub(crate) started_at_ms: u64,
    pub(crate) interval: Duration,
}

impl Identity {
    pub(crate) fn new(queues: Vec<String>, concurrency: usize, interval: Duration) -> Self {
        Identity {
            worker_id: Uuid::new_v4(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: std::process::id(),
            queues,
            concurrency,
            started_at_ms: now_ms(),
            interval,
        }
    }

    fn beat(&self, handle: &HandleInner, ledger: &Ledger, stopping: bool) -> Heartbeat {
        Heartbeat {
            worker_id: self.worker_id,
            host: self.host.clone(),
            name: None,
            pid: self.pid,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            queues: self.queues.clone(),
            paused: handle.paused(),
            concurrency: self.concurrency,
            connection: handle.backend_state().as_str().to_owned(),
            started_at_ms: self.started_at_ms,
            at_ms: now_ms(),
            interval_ms: u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX),
            stopping,
            running: ledger.running(),
            totals: ledger.totals(),
            limits: crate::limit::seen::listed(),
        }
    }
}

/// Sends a heartbeat at once and then every interval until shutdown. The
/// last one, saying the worker stops, is sent by [`last`].
pub(crate) async fn beat(
    backend: Arc<dyn Backend>,
    identity: Identity,
    handle: Arc<HandleInner>,
    ledger: Arc<Ledger>,
) {
    let Some(backend) = backend.capabilities().heartbeats() else {
        tracing::debug!(
            "the worker's backend keeps no heartbeats; operators will not see it listed"
        );
        return;
    };
    let mut stop: watch::Receiver<bool> = handle.stop.subscribe();
    let mut ticks = tokio::time::interval(identity.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            _ = ticks.tick() => {}
        }
        let beat = identity.beat(&handle, &ledger, false);
        let sent = tokio::time::timeout(identity.interval, backend.heartbeat(&beat)).await;
        match sent {
            Ok(Ok(())) => {
                if failing {
                    tracing::info!("heartbeats are getting through again");
                }
                failing = false;
            }
            Ok(Err(error)) if !failing => {
                failing = true;
                tracing::warn!(%error, "could not send the worker's heartbeat; operators may not see this worker until one gets through");
            }
            Err(_) if !failing => {
                failing = true;
                tracing::warn!(
                    "the worker's heartbeat timed out; operators may not see this worker until one gets through"
                );
            }
            _ => {}
        }
    }
}

/// Sends the worker's last heartbeat, so that it drops off the list of
/// workers at once.
pub(crate) async fn last(
    backend: &dyn Backend,
    identity: &Identity,
    handle: &HandleInner,
    ledger: &Ledger,
) {
    let Some(backend) = backend.capabilities().heartbeats() else {
        return;
    };
    let beat = identity.beat(handle, ledger, true);
    match tokio::time::timeout(Duration::from_secs(2), backend.heartbeat(&beat)).await {
        Ok(Ok(())) => {}
        _ => tracing::debug!(
            "could not send the worker's last heartbeat; it drops off the list of workers once its heartbeats are old"
        ),
    }
}
