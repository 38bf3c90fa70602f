//! The worker: consumes queues, runs each job through its stack, and
//! settles the outcome on the broker.
mod builder;
mod consume;
mod consumer_timeout;
mod error;
mod fnv;
mod gate;
mod handle;
mod handlers;
mod heartbeat;
mod job;
mod periodic;
mod reconnect;
mod route;
mod routes;
mod stack;
mod tasks;
mod turns;
mod wing;

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Backend;

use queuey_core::control::ControlView;
use queuey_core::{Error, Namespace, Queues};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use builder::Settings;
pub use builder::{DEFAULT_SHUTDOWN_TIMEOUT, WorkerBuilder};
pub use error::WorkerError;
pub use handle::WorkerHandle;
pub use handlers::Handlers;
pub use stack::{DEFAULT_JOB_TIMEOUT, DefaultStack, Defaults};
pub use turns::MAX_TENANT_WEIGHT;

use consume::{QueueRoutes, WorkerShared};
use handle::HandleInner;
use route::Route;
use wing::UniqueKeys;

/// Runs jobs of the queue set `Q` from the backend `B`: consumes its queues,
/// runs each job through its stack, and settles the outcome on the broker.
/// Build one with [`Worker::builder`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use queuey_core::{Job, JobContext, JobError, JobHandler, Producer, Queues};
/// use queuey_core::memory::MemoryBackend;
/// use queuey_tower::Worker;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// #[queues(prefix = "app")]
/// enum AppQueues {
///     Emails,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Emails, name = "send_email")]
/// struct SendEmail {
///     to: String,
/// }
///
/// struct EmailHandler;
/// impl JobHandler for EmailHandler {
///     type Job = SendEmail;
///     async fn handle(&self, job: SendEmail, _ctx: JobContext) -> Result<(), JobError> {
///         println!("sending to {}", job.to);
///         Ok(())
///     }
/// }
///
/// let backend = Arc::new(MemoryBackend::new());
/// let worker = Worker::<AppQueues, _>::builder(backend.clone())
///     .handler(EmailHandler)
///     .build()
///     .await?;
/// let handle = worker.handle();
/// let running = tokio::spawn(worker.run());
///
/// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
/// producer.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
/// while handle.jobs_finished() < 1 {
///     tokio::task::yield_now().await;
/// }
/// handle.shutdown();
/// running.await??;
/// # Ok(())
/// # }
/// ```
///
/// # Shaping a handler's stack
///
/// Each handler's stack follows from the [`WorkerBuilder`] method that gave it:
///
/// | method | the handler's stack, outermost first |
/// |---|---|
/// | [`handler(h)`](WorkerBuilder::handler) | the [`DefaultStack`]: trace, metrics, dead-letter, deadline, retry, deferral, job timeout, `h` |
/// | [`handler_with(h, layer)`](WorkerBuilder::handler_with) | the default stack with `layer` around the job timeout: trace, …, deferral, `layer`, job timeout, `h` |
/// | [`handler_without_default_stack(h, layer)`](WorkerBuilder::handler_without_default_stack) | `layer`, job timeout, `h` |
///
/// In all three, the [job timeout](WorkerBuilder::job_timeout) (5 minutes
/// unless set) bounds each call of the handler (a timeout is a transient
/// failure); layers given to [`WorkerBuilder::layer`] wrap every handler's
/// whole stack (so must fit every job type); an error that leaves the stack
/// is deferred by the worker if the classifier calls it a wait, else
/// dead-lettered.
///
/// ## The default stack, with layers of your own
///
/// [`handler_with`](WorkerBuilder::handler_with) adds `layer` around one
/// handler inside the default stack: its answers are retried, deferred and
/// dead-lettered like the handler's, and a [`RetryLayer`](struct@crate::retry::RetryLayer)
/// or [`DeferOn429`](struct@crate::defer::DeferOn429) in it decides first, so
/// this is where a handler gets its own retry policy, deferral limit,
/// cool-down or rate limit:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use queuey_core::{handler_fn, Backoff, Job, JobContext, JobError, Queues, RetryPolicy};
/// use queuey_core::memory::MemoryBackend;
/// use queuey_tower::cooldown::CooldownLayer;
/// use queuey_tower::defer::DeferOn429;
/// use queuey_tower::{JobRequest, ServiceBuilder, Worker};
/// use queuey_tower::retry::RetryLayer;
/// use serde::{Deserialize, Serialize};
/// use tower::limit::ConcurrencyLimitLayer;
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Emails,
///     Webhooks,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Emails, name = "send_email")]
/// struct SendEmail;
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Webhooks, name = "call_webhook")]
/// struct CallWebhook {
///     host: String,
/// }
///
/// let emails = handler_fn(|_: SendEmail, _: JobContext| async { Ok::<(), JobError>(()) });
/// let webhooks = handler_fn(|_: CallWebhook, _: JobContext| async { Ok::<(), JobError>(()) });
/// let policy = RetryPolicy::new(8, Backoff::fixed(Duration::from_secs(30))?)?;
/// let worker = Worker::<AppQueues, _>::builder(Arc::new(MemoryBackend::new()))
///     .handler(emails)
///     .handler_with(
///         webhooks,
///         ServiceBuilder::new()
///             // After one 429 from a host, its other jobs wait without calling it.
///             .layer(CooldownLayer::new(|r: &JobRequest<CallWebhook>| Some(r.job().host.clone())))
///             .layer(RetryLayer::new(policy))
///             .layer(DeferOn429::new().max_deferrals(20))
///             .layer(ConcurrencyLimitLayer::new(4)),
///     )
///     .job_timeout(Duration::from_secs(20))
///     .build()
///     .await?;
/// # drop(worker);
/// # Ok(())
/// # }
/// ```
///
/// ## A stack of your own instead
///
/// [`handler_without_default_stack`](WorkerBuilder::handler_without_default_stack)
/// puts `layer` in place of the default stack, keeping only the job timeout;
/// compose queuey's and tower's layers with `ServiceBuilder`:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use queuey_core::{handler_fn, Backoff, Job, JobContext, JobError, Queues, RetryPolicy};
/// use queuey_core::memory::MemoryBackend;
/// use queuey_tower::dead_letter::DeadLetterLayer;
/// use queuey_tower::defer::DeferOn429;
/// use queuey_tower::retry::RetryLayer;
/// use queuey_tower::{ServiceBuilder, Worker};
/// use queuey_tower::trace::TraceLayer;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Reports,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Reports, name = "build_report")]
/// struct BuildReport;
///
/// let reports = handler_fn(|_: BuildReport, _: JobContext| async { Ok::<(), JobError>(()) });
/// let policy = RetryPolicy::new(3, Backoff::fixed(Duration::from_secs(60))?)?;
/// let worker = Worker::<AppQueues, _>::builder(Arc::new(MemoryBackend::new()))
///     .handler_without_default_stack(
///         reports,
///         ServiceBuilder::new()
///             .layer(TraceLayer::new())
///             .layer(DeadLetterLayer::new())
///             .layer(RetryLayer::new(policy))
///             .layer(DeferOn429::new()),
///     )
///     // Still bounds each call of the handler.
///     .job_timeout(Duration::from_secs(600))
///     .build()
///     .await?;
/// # drop(worker);
/// # Ok(())
/// # }
/// ```
///
/// # Stacks
///
/// Each job type has one stack, owned by the worker: its queue's loop polls
/// it ready before taking each delivery, then calls it, as tower's drivers
/// do. Nothing is cloned per job, so a stack need not be `Clone` or `Sync`:
/// `RateLimitLayer`, `ConcurrencyLimitLayer`, `LoadShedLayer`, `BufferLayer`,
/// `BoxService` and stateful middleware of your own work unchanged, their
/// state living as long as the worker. A stack that is not ready leaves its
/// queue's next delivery with the broker.
///
/// # Order
///
/// Layers added first are outermost. The usual order, the [`DefaultStack`]'s,
/// is trace, metrics, dead-letter, deadline, retry, deferral, timeout, handler:
///
/// - a timeout **inside** the retry layer bounds each attempt, and a timed
///   out attempt is retried (outside, it would bound the decision);
/// - [`DeferOn429`](struct@crate::defer::DeferOn429) inside [`RetryLayer`](struct@crate::retry::RetryLayer)
///   sees a `Retry-After` first, so a deferral spends no attempt, and a
///   deferral past its limit is retried;
/// - [`DeadLetterLayer`](crate::dead_letter::DeadLetterLayer) outside both
///   catches what they pass on (fatal errors), so metrics and tracing see
///   the final disposition.
///
/// # Settling
///
/// The worker publishes first, waits for the broker's confirmation, and
/// acknowledges last: a crash in between duplicates a job, never loses one.
/// The backend builds the next envelope from the
/// [`Disposition`](queuey_core::Disposition). A failed settle (a refused
/// hold, a dropped connection) leaves the delivery for the broker to deliver
/// again, and is logged and counted on the [`WorkerHandle`] (one taken on a
/// lost connection as a [stale settle](WorkerHandle::stale_settles)).
///
/// # Connection loss
///
/// A worker outlives its connection; the backend decides whether it heals
/// (the RabbitMQ backend reconnects by itself, for as long as its
/// `reconnect_deadline` allows, for ever by default, and resumes its
/// consumers). The worker follows:
///
/// - a queue whose consumer is lost anyway (a transient stream error, or an
///   end while the backend is up) consumes again once the backend is
///   connected; only a consume refused on a working connection is retried
///   after the worker's own jittered backoff (100 ms growing to 5 s). The
///   [`WorkerHandle`] shows the queue as reconnecting meanwhile;
/// - a loop waiting for a slot or a ready stack listens for
///   [connection changes](queuey_core::backend::Backend::connection_changed),
///   so a loss is noticed at once and the stale delivery left to the broker;
/// - [`Worker::run`] gives up only on what cannot heal: a non-transient
///   consumer error, a closed backend, or one that
///   [gave up](queuey_core::backend::ConnectionState::Failed)
///   ([`WorkerError::BackendFailed`], with its reason). The worker has no
///   reconnect deadline of its own.
///
/// On shutdown, a delivery taken but not started goes back to the broker at
/// once; started jobs finish (up to the shutdown timeout) and are settled.
///
/// # Pauses and cancellations
///
/// A worker follows its fleet's [control commands](queuey_core::control)
/// when its backend carries them (both built-in ones do), reading every
/// command sent so far before it consumes anything:
///
/// - a paused queue gets no delivery taken: running jobs finish, one taken
///   but not started goes back to the broker, other queues keep flowing, and
///   [`WorkerHandle::paused_queues`] names it;
/// - a cancelled job is dead-lettered as `cancelled` instead of run; one
///   cancelled while it runs is told through its
///   [`JobContext::cancel_signal`](queuey_core::JobContext::cancel_signal)
///   and, unless its handler completes it, dead-lettered rather than retried.
///
/// [`WorkerBuilder::without_control`] turns this off.
pub struct Worker<Q, B> {
    backend: Arc<B>,
    queues: Vec<QueueRoutes>,
    concurrency: usize,
    handle: WorkerHandle,
    unique_keys: Option<UniqueKeys>,
    control: Option<ControlView>,
    settings: Settings,
    _queues: PhantomData<fn() -> Q>,
}

impl<Q: Queues, B: Backend> Worker<Q, B> {
    /// Starts building a worker on `backend`.
    pub fn builder(backend: B) -> WorkerBuilder<Q, B> {
        WorkerBuilder::new(backend)
    }

    async fn new(
        backend: B,
        routes: Vec<Box<dyn Route>>,
        mut settings: Settings,
    ) -> Result<Self, Error> {
        if routes.is_empty() {
            return Err(Error::invalid_config(
                "the worker has no handler: add one with WorkerBuilder::handler, \
                 ::handler_with or ::handler_without_default_stack",
            ));
        }
        let unique_keys = settings.store.take().map(|store| {
            let handled = routes.iter().map(|r| (r.job_type(), r.declared_unique()));
            UniqueKeys::new(store, settings.store_timeout, handled)
        });
        let namespace = &settings.namespace;
        periodic::check_all(&settings.periodic)?;
        let mut by_queue: Vec<(&'static str, QueueRoutes)> = Vec::new();
        for route in routes {
            let index = match by_queue.iter().position(|(own, _)| *own == route.queue()) {
                Some(i) => i,
                None => {
                    let config = Q::ALL
                        .iter()
                        .find(|q| q.name() == route.queue())
                        .map(|q| namespace.config(q))
                        .ok_or_else(|| {
                            Error::invalid_config(format!(
                                "job type `{}` names queue `{}`, which is not in the queue set",
                                route.job_type(),
                                route.queue()
                            ))
                        })?;
                    let queue: Arc<str> = Arc::from(config.name());
                    by_queue.push((
                        route.queue(),
                        QueueRoutes {
                            settling: Arc::new(job::settling_key(&queue)),
                            queue,
                            physical: turns::Intake {
                                queues: match only_shards(&settings.only_shards, route.queue()) {
                                    Some(shards) => config.physical_only(shards)?,
                                    None => config.physical(),
                                },
                                weights: settings.tenant_weights.clone(),
                            },
                            config,
                            routes: routes::Routes::new(),
                        },
                    ));
                    by_queue.len() - 1
                }
            };
            let job_type = route.job_type();
            if !by_queue[index].1.routes.insert(route) {
                return Err(Error::invalid_config(format!(
                    "job type `{job_type}` has two handlers; give each job type one"
                )));
            }
        }
        if let Some((queue, _)) = settings
            .only_shards
            .iter()
            .find(|(queue, _)| !by_queue.iter().any(|(own, _)| own == queue))
        {
            return Err(Error::invalid_config(format!(
                "shards of queue `{queue}` were given to take, but no handler of this worker \
                 takes jobs of that queue"
            )));
        }
        let by_queue: Vec<QueueRoutes> = by_queue.into_iter().map(|(_, q)| q).collect();
        let concurrency = settings.concurrency.unwrap_or_else(|| {
            by_queue
                .iter()
                .map(|q| usize::from(q.config.settings().prefetch()))
                .sum()
        });
        if concurrency == 0 {
            return Err(Error::invalid_config(
                "the worker's concurrency must be at least 1",
            ));
        }
        let job_timeout = settings.job_timeout.unwrap_or(DEFAULT_JOB_TIMEOUT);
        consumer_timeout::check(&backend, &by_queue, job_timeout, concurrency)?;
        backend
            .declare(&namespace.configs::<Q>())
            .await
            .map_err(|e| namespace.explain(e))?;
        // Caught up with every command sent so far, before consuming
        // anything: a queue paused now stays untouched.
        let control = match (settings.follow_control, backend.capabilities().control()) {
            (true, Some(channel)) => Some(channel.follow_control().await?),
            (true, None) => {
                tracing::debug!(
                    "the worker's backend carries no control commands; it runs without pauses \
                     and cancellations"
                );
                None
            }
            (false, _) => None,
        };
        let backend = Arc::new(backend);
        let state = Arc::clone(&backend);
        Ok(Worker {
            backend,
            queues: by_queue,
            concurrency,
            handle: WorkerHandle {
                inner: Arc::new(HandleInner::new(Box::new(move || state.connection_state()))),
            },
            unique_keys,
            control,
            settings,
            _queues: PhantomData,
        })
    }

    /// A handle to stop the worker and read its counters and state.
    pub fn handle(&self) -> WorkerHandle {
        self.handle.clone()
    }

    /// The queues this worker consumes, by their names on the broker.
    pub fn queues(&self) -> impl Iterator<Item = &str> {
        self.queues.iter().map(|q| &*q.queue)
    }

    /// The namespace of the queues this worker consumes.
    pub fn namespace(&self) -> &Namespace {
        &self.settings.namespace
    }

    /// The backend the worker consumes, for the test runner.
    pub(crate) fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// Every broker queue the worker consumes (lanes and shards taken).
    pub(crate) fn broker_queues(&self) -> Vec<String> {
        self.queues
            .iter()
            .flat_map(|q| q.physical.queues.iter().map(|c| c.name().to_owned()))
            .collect()
    }

    /// Whether periodic jobs fire beside the handlers.
    pub(crate) fn has_periodic(&self) -> bool {
        !self.settings.periodic.is_empty()
    }

    /// Consumes every handled queue (again whenever a consumer is lost)
    /// until [`WorkerHandle::shutdown`], then lets jobs in flight finish (up
    /// to the shutdown timeout). Fails ([`WorkerError`]) when a consumer
    /// failed for good, the backend gave up or was closed, or a stack can
    /// take no more jobs.
    pub async fn run(self) -> Result<(), WorkerError> {
        let Worker {
            backend,
            queues,
            concurrency,
            handle,
            unique_keys,
            control,
            settings,
            _queues,
        } = self;
        let Settings {
            shutdown_timeout,
            classifier,
            reconnect,
            namespace,
            periodic,
            heartbeat_interval,
            ..
        } = settings;
        let ledger = Arc::new(heartbeat::Ledger::default());
        let queue_names: Vec<Arc<str>> = queues.iter().map(|q| Arc::clone(&q.queue)).collect();
        let identity = heartbeat::Identity::new(
            queues.iter().map(|q| q.queue.to_string()).collect(),
            concurrency,
            heartbeat_interval,
        );
        let shared = Arc::new(WorkerShared {
            permits: Arc::new(Semaphore::new(concurrency)),
            jobs: tasks::JobTasks::new(),
            control: control.clone(),
            env: Arc::new(job::JobEnv {
                handle: Arc::clone(&handle.inner),
                classifier,
                wings: wing::wings(
                    control,
                    &handle.inner,
                    Arc::clone(&backend) as Arc<dyn Backend>,
                    &ledger,
                    &queue_names,
                    unique_keys,
                ),
            }),
        });
        // A set, so that dropping `run` stops the heartbeats too.
        let mut beats = JoinSet::new();
        beats.spawn(heartbeat::beat(
            Arc::clone(&backend) as Arc<dyn Backend>,
            identity.clone(),
            Arc::clone(&handle.inner),
            Arc::clone(&ledger),
        ));
        let mut loops = JoinSet::new();
        for queue in queues {
            loops.spawn(consume::consume(
                queue,
                Arc::clone(&backend),
                Arc::clone(&shared),
                reconnect.clone(),
            ));
        }
        let mut schedules = JoinSet::new();
        for p in periodic {
            schedules.spawn((p.start)(namespace.clone(), handle.inner.stop.subscribe()));
        }
        let mut first_error = None;
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
            handle.shutdown();
        }
        // The schedules stop with the consumers, giving up their leases.
        while schedules.join_next().await.is_some() {}
        drain(&shared, concurrency, shutdown_timeout).await;
        // The jobs have ended; what the backend still sends for them goes
        // out before `run` returns.
        backend.flush().await;
        beats.abort_all();
        heartbeat::last(&*backend, &identity, &handle.inner, &ledger).await;
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Runs until `signal` completes, then shuts down as
    /// [`WorkerHandle::shutdown`] does: a delivery taken but not started goes
    /// back to the broker, started jobs finish and settle (up to the
    /// [`shutdown_timeout`](WorkerBuilder::shutdown_timeout)), other jobs
    /// stay with the broker. Returns early, with the error, if the worker
    /// stops by itself. The usual signal is
    /// [`shutdown_signal`](crate::shutdown_signal()): Ctrl-C or `SIGTERM`.
    ///
    /// ```no_run
    /// # async fn run(worker: queuey_tower::Worker<impl queuey_core::Queues, impl queuey_core::backend::Backend>)
    /// # -> Result<(), queuey_tower::WorkerError> {
    /// worker.run_until(queuey_tower::shutdown_signal()).await
    /// # }
    /// ```
    pub async fn run_until<F: Future>(self, signal: F) -> Result<(), WorkerError> {
        let handle = self.handle();
        crate::signal::run_until(self.run(), signal, move || handle.shutdown()).await
    }
}

/// The shards given to take of `queue`, if any were.
fn only_shards<'a>(given: &'a [(&'static str, Vec<u16>)], queue: &str) -> Option<&'a [u16]> {
    given
        .iter()
        .find(|(own, _)| *own == queue)
        .map(|(_, shards)| shards.as_slice())
}

/// Waits for jobs in flight up to the shutdown timeout, then abandons the
/// rest, unsettled, to the broker.
async fn drain(shared: &WorkerShared, concurrency: usize, shutdown_timeout: Duration) {
    let all = u32::try_from(concurrency).unwrap_or(u32::MAX);
    // Each running job holds a permit until it ends.
    let drained = tokio::time::timeout(shutdown_timeout, shared.permits.acquire_many(all)).await;
    if drained.is_err() {
        tracing::warn!(
            in_flight = concurrency.saturating_sub(shared.permits.available_permits()),
            timeout = ?shutdown_timeout,
            "jobs still running at the shutdown timeout are abandoned to the broker"
        );
        shared.jobs.abandon_all();
        // An abandoned job is dropped at its next wake-up, its permit with it.
        let _ = shared.permits.acquire_many(all).await;
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
            .field("shutdown_timeout", &self.settings.shutdown_timeout)
            .field("classifier", &self.settings.classifier)
            .field("namespace", &self.settings.namespace)
            .finish()
    }
}
