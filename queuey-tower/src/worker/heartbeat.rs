//! The worker's heartbeat: what it runs and has done, sent to the backend
//! every few seconds for the fleet's operators.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuey_core::backend::Backend;
use queuey_core::control::{Heartbeat, QueueTotals, RunningJob};
use queuey_core::{Envelope, Uuid};
use tokio::sync::watch;

use super::consume::stopped;
use super::fnv::Fnv1a;
use super::handle::HandleInner;

/// What the worker's heartbeats report: its running jobs and its totals.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Each start gets the next key: cheaper than an id drawn at random,
    /// and two deliveries of one job running at once stay apart.
    next: AtomicU64,
    running: Mutex<HashMap<u64, Running, BuildHasherDefault<Fnv1a>>>,
    totals: Mutex<BTreeMap<Arc<str>, QueueTotals>>,
}

/// A running job as the ledger keeps it: nothing copied but the id.
#[derive(Debug)]
struct Running {
    job_id: Uuid,
    job_type: &'static str,
    queue: Arc<str>,
    attempt: u32,
    started_at_ms: u64,
}

impl Ledger {
    /// A job of the type `job_type` started; returns the key to
    /// [`finished`](Ledger::finished).
    pub(crate) fn started(
        &self,
        envelope: &Envelope,
        job_type: &'static str,
        queue: &Arc<str>,
    ) -> u64 {
        let job = Running {
            job_id: envelope.job_id,
            job_type,
            queue: Arc::clone(queue),
            attempt: envelope.attempt,
            started_at_ms: now_ms(),
        };
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.running).insert(key, job);
        key
    }

    /// The job started under `key` stopped running.
    pub(crate) fn finished(&self, key: u64) {
        lock(&self.running).remove(&key);
    }

    /// A job of `queue` was settled with the disposition named `what`
    /// (`Disposition::as_str`).
    pub(crate) fn settled(&self, queue: &Arc<str>, what: &str) {
        let mut totals = lock(&self.totals);
        let entry = totals
            .entry(Arc::clone(queue))
            .or_insert_with(|| QueueTotals {
                queue: queue.to_string(),
                ..QueueTotals::default()
            });
        match what {
            "ack" => entry.finished += 1,
            "retry" => entry.retried += 1,
            "defer" => entry.deferred += 1,
            "dead_letter" => entry.dead_lettered += 1,
            _ => {}
        }
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
            })
            .collect();
        running.sort_by_key(|job| (job.started_at_ms, job.job_id));
        running
    }

    fn totals(&self) -> Vec<QueueTotals> {
        lock(&self.totals).values().cloned().collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
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
    let beat = identity.beat(handle, ledger, true);
    match tokio::time::timeout(Duration::from_secs(2), backend.heartbeat(&beat)).await {
        Ok(Ok(())) => {}
        _ => tracing::debug!(
            "could not send the worker's last heartbeat; it drops off the list of workers once its heartbeats are old"
        ),
    }
}
