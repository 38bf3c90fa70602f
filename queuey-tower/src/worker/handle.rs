use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// Counters and the stop switch of a running worker; cheap to clone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use std::sync::Arc;
/// # use queuey_core::{handler_fn, Job, JobContext, JobError, MemoryBackend, Queues};
/// # use queuey_tower::Worker;
/// # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)] enum Q { Default }
/// # #[derive(Job, serde::Serialize, serde::Deserialize)] #[job(queue = Q::Default)] struct Ping;
/// let worker = Worker::<Q, _>::builder(Arc::new(MemoryBackend::new()))
///     .handler(handler_fn(|_: Ping, _: JobContext| async { Ok::<_, JobError>(()) }))
///     .build()
///     .await?;
/// let handle = worker.handle();
/// let running = tokio::spawn(worker.run());
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

#[derive(Debug)]
pub(crate) struct HandleInner {
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) settle_failures: AtomicU64,
    pub(crate) jobs_started: AtomicU64,
    pub(crate) jobs_settled: AtomicU64,
}

impl HandleInner {
    pub(crate) fn new() -> Self {
        HandleInner {
            stop: watch::channel(false).0,
            settle_failures: AtomicU64::new(0),
            jobs_started: AtomicU64::new(0),
            jobs_settled: AtomicU64::new(0),
        }
    }
}

impl WorkerHandle {
    /// Asks the worker to stop: it takes no further deliveries, lets the
    /// jobs it already took finish and settle (up to its shutdown timeout),
    /// and leaves everything else with the broker for redelivery.
    /// [`Worker::run`](super::Worker::run) then returns.
    pub fn shutdown(&self) {
        self.inner.stop.send_replace(true);
    }

    /// Whether shutdown was requested.
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.stop.borrow()
    }

    /// Dispositions the worker could not carry out on the broker. Each such
    /// delivery was left unacknowledged for the broker to redeliver.
    pub fn settle_failures(&self) -> u64 {
        self.inner.settle_failures.load(Ordering::Relaxed)
    }

    /// Deliveries taken so far.
    pub fn jobs_started(&self) -> u64 {
        self.inner.jobs_started.load(Ordering::Relaxed)
    }

    /// Deliveries settled successfully so far.
    pub fn jobs_settled(&self) -> u64 {
        self.inner.jobs_settled.load(Ordering::Relaxed)
    }

    /// Jobs taken and not yet finished (settled or failed to settle).
    pub fn in_flight(&self) -> u64 {
        self.jobs_started()
            .saturating_sub(self.jobs_settled() + self.settle_failures())
    }
}
