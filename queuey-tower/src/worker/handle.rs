use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use queuey_core::backend::ConnectionState;
use tokio::sync::watch;

/// Counters, state and the stop switch of a running worker; cheap to clone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use std::sync::Arc;
/// # use queuey_core::{handler_fn, Job, JobContext, JobError, Queues};
/// # use queuey_core::backend::ConnectionState;
/// # use queuey_core::memory::MemoryBackend;
/// # use queuey_tower::Worker;
/// # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)] enum Q { Default }
/// # #[derive(Job, serde::Serialize, serde::Deserialize)] #[job(queue = Q::Default)] struct Ping;
/// let worker = Worker::<Q, _>::builder(Arc::new(MemoryBackend::new()))
///     .handler(handler_fn(|_: Ping, _: JobContext| async { Ok::<_, JobError>(()) }))
///     .build()
///     .await?;
/// let handle = worker.handle();
/// let running = tokio::spawn(worker.run());
/// assert_eq!(handle.connection_state(), ConnectionState::Connected);
/// handle.shutdown();
/// running.await??;
/// assert_eq!(handle.settle_failures(), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WorkerHandle {
    pub(crate) inner: Arc<HandleInner>,
}

pub(crate) struct HandleInner {
    pub(crate) stop: watch::Sender<bool>,
    backend_state: Box<dyn Fn() -> ConnectionState + Send + Sync>,
    pub(crate) settle_failures: AtomicU64,
    pub(crate) stale_settles: AtomicU64,
    pub(crate) jobs_started: AtomicU64,
    pub(crate) jobs_settled: AtomicU64,
    pub(crate) jobs_finished: AtomicU64,
    pub(crate) jobs_running: AtomicU64,
    pub(crate) jobs_settling: AtomicU64,
    pub(crate) queues_reconnecting: AtomicU64,
    pub(crate) consumer_restarts: AtomicU64,
    pub(crate) jobs_cancelled: AtomicU64,
    /// The queues this worker stays off because they are paused.
    paused: Mutex<BTreeSet<Arc<str>>>,
}

impl HandleInner {
    pub(crate) fn new(backend_state: Box<dyn Fn() -> ConnectionState + Send + Sync>) -> Self {
        HandleInner {
            stop: watch::channel(false).0,
            backend_state,
            settle_failures: AtomicU64::new(0),
            stale_settles: AtomicU64::new(0),
            jobs_started: AtomicU64::new(0),
            jobs_settled: AtomicU64::new(0),
            jobs_finished: AtomicU64::new(0),
            jobs_running: AtomicU64::new(0),
            jobs_settling: AtomicU64::new(0),
            queues_reconnecting: AtomicU64::new(0),
            consumer_restarts: AtomicU64::new(0),
            jobs_cancelled: AtomicU64::new(0),
            paused: Mutex::new(BTreeSet::new()),
        }
    }

    pub(crate) fn paused(&self) -> Vec<String> {
        let set = crate::lock(&self.paused);
        set.iter().map(|q| q.to_string()).collect()
    }

    pub(crate) fn set_paused(&self, queue: &Arc<str>, paused: bool) {
        let mut set = crate::lock(&self.paused);
        if paused {
            set.insert(Arc::clone(queue));
        } else {
            set.remove(queue);
        }
    }

    pub(crate) fn backend_state(&self) -> ConnectionState {
        (self.backend_state)()
    }
}

impl fmt::Debug for HandleInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleInner")
            .field("stopping", &*self.stop.borrow())
            .field("backend_state", &self.backend_state())
            .finish_non_exhaustive()
    }
}

/// Adds one to a gauge for as long as it lives.
pub(crate) struct Counting<'a>(&'a AtomicU64);

impl<'a> Counting<'a> {
    pub(crate) fn new(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        Counting(gauge)
    }
}

impl Drop for Counting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `pub fn name(&self) -> u64`: the worker's counter `name`, now.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        $($(#[$doc])* pub fn $name(&self) -> u64 {
            self.inner.$name.load(Ordering::Relaxed)
        })*
    };
}

impl WorkerHandle {
    /// Asks the worker to stop: it takes no further deliveries, hands back
    /// one it took but had not started, lets the jobs it started finish and
    /// settle (up to its shutdown timeout), and leaves everything else with
    /// the broker. [`Worker::run`](super::Worker::run) then returns.
    pub fn shutdown(&self) {
        self.inner.stop.send_replace(true);
    }

    /// Whether shutdown was requested.
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.stop.borrow()
    }

    /// How the worker's link to the broker stands:
    /// [`Reconnecting`](ConnectionState::Reconnecting) while any queue's
    /// consumer is being started again, else what the backend reports.
    pub fn connection_state(&self) -> ConnectionState {
        match self.queues_reconnecting() {
            0 => self.inner.backend_state(),
            _ => ConnectionState::Reconnecting,
        }
    }

    counters! {
        /// Queues whose consumer was lost and is being started again.
        queues_reconnecting;
        /// Cancelled jobs this worker dead-lettered instead of running or
        /// retrying them.
        jobs_cancelled;
        /// Consumers started again after a loss, over the worker's life.
        consumer_restarts;
        /// Dispositions the worker could not carry out on the broker. Each such
        /// delivery was left unacknowledged for the broker to redeliver.
        settle_failures;
        /// Of the [`settle_failures`](Self::settle_failures), those whose
        /// delivery was stale: it came on a connection that is gone, so the
        /// broker delivers it again.
        stale_settles;
        /// Deliveries taken so far. A job retried twice is three deliveries.
        jobs_started;
        /// Deliveries settled successfully so far, whatever their disposition:
        /// a retry or a deferral settles one delivery and the job comes back
        /// as another.
        jobs_settled;
        /// Jobs that reached their end so far: settled as done (acknowledged)
        /// or dead-lettered. Unlike [`jobs_settled`](Self::jobs_settled), a job
        /// counts once however often it was retried or deferred.
        jobs_finished;
        /// Jobs inside their stack now.
        jobs_running;
        /// Jobs whose outcome is being carried out on the broker now.
        jobs_settling;
    }

    /// The queues (their names on the broker) this worker stays off right
    /// now because an operator paused them.
    pub fn paused_queues(&self) -> Vec<String> {
        self.inner.paused()
    }

    /// Jobs taken and not yet finished (settled or failed to settle).
    pub fn in_flight(&self) -> u64 {
        self.jobs_started()
            .saturating_sub(self.jobs_settled() + self.settle_failures())
    }
}

pub(crate) use crate::signal::stopped;
