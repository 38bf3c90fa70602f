//! The worker: consumes queues, runs each job through its stack, and
//! settles the outcome on the broker.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use queuey_core::{Job, JobContext, JobError, JobHandler, MemoryBackend, Producer, Queues};
//! use queuey_tower::{DeferOn429, RetryLayer, Worker};
//! use serde::{Deserialize, Serialize};
//! use tower::ServiceBuilder;
//! use tower::timeout::TimeoutLayer;
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! #[queues(prefix = "app")]
//! enum AppQueues {
//!     Emails,
//! }
//!
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = AppQueues::Emails)]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! struct EmailHandler;
//! impl JobHandler for EmailHandler {
//!     type Job = SendEmail;
//!     async fn handle(&self, job: SendEmail, _ctx: JobContext) -> Result<(), JobError> {
//!         println!("sending to {}", job.to);
//!         Ok(())
//!     }
//! }
//!
//! let backend = Arc::new(MemoryBackend::new());
//! let worker = Worker::<AppQueues, _>::builder(backend.clone())
//!     .handler(EmailHandler)
//!     .layer(
//!         ServiceBuilder::new()
//!             .layer(RetryLayer::default())
//!             .layer(DeferOn429::new())
//!             .layer(TimeoutLayer::new(Duration::from_secs(30))),
//!     )
//!     .build()
//!     .await?;
//! let handle = worker.handle();
//! let running = tokio::spawn(worker.run());
//!
//! let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
//! producer.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
//! while handle.jobs_settled() < 1 {
//!     tokio::task::yield_now().await;
//! }
//! handle.shutdown();
//! running.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Order
//!
//! Layers added first are outermost. The usual order, and the one of the
//! [`DefaultStack`], is trace, metrics, dead-letter, retry, deferral,
//! timeout, handler:
//!
//! - a timeout **inside** the retry layer bounds each attempt, and a timed
//!   out attempt is retried; outside it, it would bound the decision, not
//!   the job;
//! - [`DeferOn429`](crate::DeferOn429) inside [`RetryLayer`](crate::RetryLayer)
//!   sees a `Retry-After` first, so a deferral spends no attempt; outside,
//!   the retry layer would pass it through untouched anyway, but a deferral
//!   past its limit would then escape retrying;
//! - [`DeadLetterLayer`](crate::DeadLetterLayer) outside both catches what
//!   they pass on (fatal errors), so layers further out (metrics, tracing)
//!   see the final disposition.
//!
//! # Settling
//!
//! The worker publishes first, waits for the broker's confirmation, and
//! acknowledges last, so a crash in between duplicates a job and never loses
//! one. When settling fails (the broker refused the hold, the connection
//! dropped), the delivery is left unacknowledged for the broker to deliver
//! again; the failure is logged at ERROR and counted on the
//! [`WorkerHandle`].

mod builder;
mod consume;
mod error;
mod handle;
mod route;
mod settle;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::{Backend, Error, Queues};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub use builder::{
    DEFAULT_JOB_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, DefaultStack, Handlers, Layers, WorkerBuilder,
};
pub use error::WorkerError;
pub use handle::WorkerHandle;

use consume::{QueueRoutes, Shared};
use handle::HandleInner;
use route::Route;

/// Runs jobs of the queue set `Q` from the backend `B`; build one with
/// [`Worker::builder`]. See the [module documentation](self).
pub struct Worker<Q, B> {
    backend: B,
    queues: Vec<Arc<QueueRoutes>>,
    concurrency: usize,
    shutdown_timeout: Duration,
    handle: WorkerHandle,
    _queues: PhantomData<fn() -> Q>,
}

impl<Q: Queues, B: Backend> Worker<Q, B> {
    /// Starts building a worker on `backend`.
    pub fn builder(backend: B) -> WorkerBuilder<Q, B> {
        WorkerBuilder::new(backend)
    }

    async fn new(
        backend: B,
        routes: Vec<Arc<dyn Route>>,
        concurrency: Option<usize>,
        shutdown_timeout: Duration,
    ) -> Result<Self, Error> {
        if routes.is_empty() {
            return Err(Error::invalid_config(
                "the worker has no handler: add one with WorkerBuilder::handler or ::service",
            ));
        }
        let mut by_queue: Vec<QueueRoutes> = Vec::new();
        for route in routes {
            let index = match by_queue.iter().position(|q| &*q.queue == route.queue()) {
                Some(i) => i,
                None => {
                    let config = Q::ALL
                        .iter()
                        .find(|q| q.name() == route.queue())
                        .map(Queues::config)
                        .ok_or_else(|| {
                            Error::invalid_config(format!(
                                "job type `{}` names queue `{}`, which is not in the queue set",
                                route.job_type(),
                                route.queue()
                            ))
                        })?;
                    by_queue.push(QueueRoutes {
                        queue: Arc::from(route.queue()),
                        config,
                        routes: HashMap::new(),
                    });
                    by_queue.len() - 1
                }
            };
            if by_queue[index]
                .routes
                .insert(route.job_type(), Arc::clone(&route))
                .is_some()
            {
                return Err(Error::invalid_config(format!(
                    "job type `{}` has two handlers; give each job type one",
                    route.job_type()
                )));
            }
        }
        let concurrency = concurrency.unwrap_or_else(|| {
            by_queue
                .iter()
                .map(|q| usize::from(q.config.prefetch_count()))
                .sum()
        });
        if concurrency == 0 {
            return Err(Error::invalid_config(
                "the worker's concurrency must be at least 1",
            ));
        }
        backend.declare(&Q::configs()).await?;
        Ok(Worker {
            backend,
            queues: by_queue.into_iter().map(Arc::new).collect(),
            concurrency,
            shutdown_timeout,
            handle: WorkerHandle {
                inner: Arc::new(HandleInner::new()),
            },
            _queues: PhantomData,
        })
    }

    /// A handle to stop the worker and read its counters.
    pub fn handle(&self) -> WorkerHandle {
        self.handle.clone()
    }

    /// The queues this worker consumes.
    pub fn queues(&self) -> impl Iterator<Item = &str> {
        self.queues.iter().map(|q| &*q.queue)
    }

    /// Consumes every handled queue until [`WorkerHandle::shutdown`] is
    /// called or a consumer fails, then lets jobs in flight finish (up to
    /// the shutdown timeout) and returns.
    ///
    /// Returns an error when a consumer failed (for example because the
    /// connection dropped) or was cancelled by the broker, or when a stack
    /// stopped being able to take jobs.
    pub async fn run(self) -> Result<(), WorkerError> {
        let shared = Arc::new(Shared {
            permits: Arc::new(Semaphore::new(self.concurrency)),
            jobs: Mutex::new(JoinSet::new()),
            handle: Arc::clone(&self.handle.inner),
            failure: Mutex::new(None),
        });
        let mut loops = JoinSet::new();
        let mut first_error = None;
        for queue in &self.queues {
            match self.backend.consume(&queue.config).await {
                Ok(stream) => {
                    loops.spawn(consume::consume(
                        Arc::clone(queue),
                        stream,
                        Arc::clone(&shared),
                    ));
                }
                Err(source) => {
                    first_error = Some(WorkerError::Consume {
                        queue: queue.queue.to_string(),
                        source,
                    });
                    break;
                }
            }
        }
        if first_error.is_some() {
            self.handle.shutdown();
        }
        while let Some(ended) = loops.join_next().await {
            let error = match ended {
                Ok(Ok(())) => continue,
                Ok(Err(error)) => error,
                Err(join) => WorkerError::Service {
                    job_type: "(consumer loop)".to_owned(),
                    source: Box::new(join),
                },
            };
            tracing::error!(%error, "stopping the worker");
            first_error.get_or_insert(error);
            self.handle.shutdown();
        }
        self.drain(&shared).await;
        let failure = shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match first_error.or(failure) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Runs until `signal` completes (for example `tokio::signal::ctrl_c()`),
    /// then shuts down gracefully.
    pub async fn run_until<F: Future>(self, signal: F) -> Result<(), WorkerError> {
        let handle = self.handle();
        let run = self.run();
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => return result,
            _ = signal => handle.shutdown(),
        }
        run.await
    }

    /// Waits for jobs in flight, up to the shutdown timeout, then abandons
    /// the rest: their deliveries are dropped unsettled and the broker
    /// delivers them again.
    async fn drain(&self, shared: &Shared) {
        let all = u32::try_from(self.concurrency).unwrap_or(u32::MAX);
        let drained =
            tokio::time::timeout(self.shutdown_timeout, shared.permits.acquire_many(all)).await;
        let mut jobs = std::mem::take(&mut *shared.jobs.lock().unwrap_or_else(|p| p.into_inner()));
        if drained.is_err() {
            tracing::warn!(
                in_flight = jobs.len(),
                timeout = ?self.shutdown_timeout,
                "jobs still running at the shutdown timeout are abandoned to the broker"
            );
            jobs.abort_all();
        }
        while jobs.join_next().await.is_some() {}
    }
}

impl<Q, B: fmt::Debug> fmt::Debug for Worker<Q, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field(
                "queues",
                &self.queues.iter().map(|q| &*q.queue).collect::<Vec<_>>(),
            )
            .field("backend", &self.backend)
            .field("concurrency", &self.concurrency)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish()
    }
}
