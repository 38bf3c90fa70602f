//! Firing periodic jobs from a process that runs no worker.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use queuey_core::backend::Backend;
use queuey_core::periodic::Leadership;
use queuey_core::{Error, Job, Producer, Queues};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::Periodic;
use super::periodic::{Entry, check_unique};

/// Fires periodic jobs through a [`Producer`], for processes that enqueue
/// and run no worker; a worker fires its own through
/// [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic).
///
/// Every process of the fleet may run the same scheduler: the backend's
/// [`Leadership`] picks one to fire each schedule's ticks.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use queuey_core::periodic::Schedule;
/// use queuey_core::{Job, Producer, Queues};
/// use queuey_core::memory::MemoryBackend;
/// use queuey_tower::periodic::{Periodic, Scheduler};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Reports,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Reports, name = "report")]
/// struct Report;
///
/// let backend = Arc::new(MemoryBackend::new());
/// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
/// let scheduler = Scheduler::new(producer)
///     .periodic(Periodic::new("report", Schedule::every(Duration::from_millis(20))?, || Report));
/// let handle = scheduler.handle();
/// let running = tokio::spawn(scheduler.run());
/// while backend.ready_count("reports") < 2 {
///     tokio::time::sleep(Duration::from_millis(5)).await;
/// }
/// handle.shutdown();
/// running.await??;
/// # Ok(())
/// # }
/// ```
pub struct Scheduler<Q, B> {
    producer: Producer<Q, B>,
    entries: Vec<Arc<dyn Entry<Q, B>>>,
    stop: watch::Sender<bool>,
}

impl<Q, B> Scheduler<Q, B>
where
    Q: Queues,
    B: Backend + Leadership + Clone,
{
    /// A scheduler enqueueing through `producer` (and in its namespace).
    pub fn new(producer: Producer<Q, B>) -> Self {
        Scheduler {
            producer,
            entries: Vec::new(),
            stop: watch::channel(false).0,
        }
    }

    /// Adds a periodic job.
    pub fn periodic<J: Job<Queues = Q>>(mut self, periodic: Periodic<J>) -> Self {
        self.entries.push(Arc::new(periodic));
        self
    }

    /// A handle to stop the scheduler.
    pub fn handle(&self) -> SchedulerHandle {
        SchedulerHandle {
            stop: self.stop.clone(),
        }
    }

    /// Fires the periodic jobs until [`SchedulerHandle::shutdown`], then
    /// gives up every lease it holds (another process takes over at once).
    ///
    /// Fails at once if a name is unusable or given twice.
    pub async fn run(self) -> Result<(), Error> {
        for (i, entry) in self.entries.iter().enumerate() {
            entry.check()?;
            check_unique(entry.name(), self.entries[..i].iter().map(|e| e.name()))?;
        }
        let mut loops = JoinSet::new();
        for entry in self.entries {
            loops.spawn(super::run::run(
                self.producer.clone(),
                entry,
                self.stop.subscribe(),
            ));
        }
        while loops.join_next().await.is_some() {}
        Ok(())
    }

    /// Runs until `signal` completes, then shuts down.
    pub async fn run_until<F: Future>(self, signal: F) -> Result<(), Error> {
        let handle = self.handle();
        crate::signal::run_until(self.run(), signal, move || handle.shutdown()).await
    }
}

/// Stops a [`Scheduler`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct SchedulerHandle {
    stop: watch::Sender<bool>,
}

impl SchedulerHandle {
    /// Stops firing: each schedule's lease is given up.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }
}

impl<Q, B: fmt::Debug> fmt::Debug for Scheduler<Q, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("producer", &self.producer)
            .field(
                "periodic",
                &self.entries.iter().map(|e| e.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}
