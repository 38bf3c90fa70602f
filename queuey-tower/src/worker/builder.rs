//! Assembling a worker: handlers and their stacks, limits.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Backend;
use queuey_core::control::DEFAULT_HEARTBEAT_INTERVAL;
use queuey_core::store::{DEFAULT_STORE_TIMEOUT, LimitStore, Store};

use queuey_core::{Error, Job, JobHandler, Namespace, Queues};
use tower_layer::{Identity, Stack};

use super::Worker;
use super::handlers::{Frame, Handlers, InsteadOfDefaults, WithLayer};
use super::periodic::PeriodicStart;
use super::reconnect::Reconnect;
use super::stack::{DEFAULT_JOB_TIMEOUT, DefaultStack, Defaults};
use super::turns::TenantWeights;
use crate::HandlerService;
use crate::classifier::{Classify, SharedClassifier};

/// How long shutdown waits for jobs in flight by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds a [`Worker`]; start with [`Worker::builder`].
///
/// Each job type gets one stack, shaped by the method that gave its
/// handler (see [Shaping a handler's stack](super::Worker#shaping-a-handlers-stack)):
///
/// - [`handler`](Self::handler): the [`DefaultStack`] around the handler;
/// - [`handler_with`](Self::handler_with): the default stack with layers of
///   your own around the handler, for that handler only;
/// - [`handler_without_default_stack`](Self::handler_without_default_stack):
///   layers of your own instead of the default stack.
///
/// In all three, [`job_timeout`](Self::job_timeout) bounds each call of the
/// handler, and layers given to [`layer`](Self::layer) wrap the whole stack.
pub struct WorkerBuilder<Q, B, H = (), L = Identity, D = DefaultStack> {
    backend: B,
    handlers: H,
    layers: L,
    defaults: D,
    settings: Settings,
    _queues: PhantomData<fn() -> Q>,
}

/// What a builder keeps whatever its type parameters, and hands the
/// worker besides its routes.
pub(super) struct Settings {
    /// Whether `layer` was called.
    layered: bool,
    pub(super) concurrency: Option<usize>,
    pub(super) shutdown_timeout: Duration,
    pub(super) job_timeout: Option<Duration>,
    pub(super) classifier: SharedClassifier,
    pub(super) reconnect: Reconnect,
    pub(super) namespace: Namespace,
    pub(super) periodic: Vec<PeriodicStart>,
    pub(super) store: Option<Arc<dyn Store>>,
    pub(super) store_timeout: Duration,
    /// Where the limits job types declare are kept.
    pub(super) limit_store: Option<Arc<dyn LimitStore>>,
    pub(super) follow_control: bool,
    pub(super) heartbeat_interval: Duration,
    /// The shards to take, for the sharded queues given to `only_shards`.
    pub(super) only_shards: Vec<(&'static str, Vec<u16>)>,
    /// The weight of each tenant in a sharded queue's turns.
    pub(super) tenant_weights: Option<TenantWeights>,
}

impl<Q: Queues, B: Backend> WorkerBuilder<Q, B> {
    pub(crate) fn new(backend: B) -> Self {
        WorkerBuilder {
            backend,
            handlers: (),
            layers: Identity::new(),
            defaults: DefaultStack::default(),
            settings: Settings {
                layered: false,
                concurrency: None,
                shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
                job_timeout: None,
                classifier: SharedClassifier::default(),
                reconnect: Reconnect::new(),
                namespace: Namespace::root(),
                periodic: Vec::new(),
                store: None,
                store_timeout: DEFAULT_STORE_TIMEOUT,
                limit_store: None,
                follow_control: true,
                heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
                only_shards: Vec::new(),
                tenant_weights: None,
            },
            _queues: PhantomData,
        }
    }
}

impl<Q: Queues, B: Backend, H, L, D: Defaults> WorkerBuilder<Q, B, H, L, D> {
    /// Adds a handler to the list, keeping every other setting.
    fn with_handler<E>(self, entry: E) -> WorkerBuilder<Q, B, (E, H), L, D> {
        WorkerBuilder {
            backend: self.backend,
            handlers: (entry, self.handlers),
            layers: self.layers,
            defaults: self.defaults,
            settings: self.settings,
            _queues: PhantomData,
        }
    }

    /// Handles jobs of `H::Job` with `handler`, inside the [`DefaultStack`]
    /// (and the layers given to [`layer`](Self::layer), whether it is called
    /// before or after this). The worker consumes the job type's queue.
    pub fn handler<Hd>(self, handler: Hd) -> WorkerBuilder<Q, B, (HandlerService<Hd>, H), L, D>
    where
        Hd: JobHandler,
        Hd::Job: Job<Queues = Q>,
    {
        self.with_handler(HandlerService::new(handler))
    }

    /// Handles jobs of `H::Job` with `handler`, inside the [`DefaultStack`]
    /// with `layer` added around the handler, for this handler only: trace,
    /// metrics, dead-letter, deadline, retry, deferral, then `layer`, then
    /// the [job timeout](Self::job_timeout), then the handler.
    ///
    /// What `layer` answers is retried, deferred, dead-lettered, counted
    /// and traced like the handler's own answers: a load shed's `Overloaded`
    /// is deferred, a timeout of yours is retried. A
    /// [`RetryLayer`](struct@crate::retry::RetryLayer) or
    /// [`DeferOn429`](struct@crate::defer::DeferOn429) in `layer` decides before the
    /// default stack's (it is closer to the handler), so
    /// `ServiceBuilder::new().layer(RetryLayer::new(policy)).layer(DeferOn429::new().max_deferrals(3))`
    /// sets this handler's retry policy and deferral limit.
    ///
    /// The layer is typed for this handler's job alone, so a layer that reads
    /// the job (a [`CooldownLayer`](crate::cooldown::CooldownLayer) keyed on
    /// `JobRequest<CallWebhook>`) fits here, however many other job types
    /// the worker handles.
    pub fn handler_with<Hd, U>(
        self,
        handler: Hd,
        layer: U,
    ) -> WorkerBuilder<Q, B, (WithLayer<Hd, U>, H), L, D>
    where
        Hd: JobHandler,
        Hd::Job: Job<Queues = Q>,
    {
        self.with_handler(WithLayer {
            handler: HandlerService::new(handler),
            layer,
        })
    }

    /// Handles jobs of `H::Job` with `handler`, inside `layer` **instead of**
    /// the [`DefaultStack`], for this handler only: `layer`, then the
    /// [job timeout](Self::job_timeout), then the handler (and the layers
    /// given to [`layer`](Self::layer) around it all).
    ///
    /// Nothing else of the default stack is added: no tracing, metrics,
    /// deadline, retry or deferral unless `layer` has them. An error that
    /// leaves the stack is dead-lettered by the worker (or deferred, if the
    /// classifier calls it a wait). Compose `layer` with `ServiceBuilder`,
    /// for example
    /// `ServiceBuilder::new().layer(RetryLayer::new(policy)).layer(DeferOn429::new())`.
    pub fn handler_without_default_stack<Hd, U>(
        self,
        handler: Hd,
        layer: U,
    ) -> WorkerBuilder<Q, B, (InsteadOfDefaults<Hd, U>, H), L, D>
    where
        Hd: JobHandler,
        Hd::Job: Job<Queues = Q>,
    {
        self.with_handler(InsteadOfDefaults {
            handler: HandlerService::new(handler),
            layer,
        })
    }

    /// Adds a layer around **every** handler's whole stack (the
    /// [`DefaultStack`] included), whichever method gave the handler.
    /// Layers added first are outermost, as with `tower::ServiceBuilder`
    /// (which is itself a layer, so a whole `ServiceBuilder` can be passed
    /// at once).
    ///
    /// Each job type gets its own instance of the layers (a
    /// `ConcurrencyLimitLayer` limits each job type on its own); one
    /// instance serves every job of its type, so middleware state (a rate
    /// limit's window, a counter of yours) persists across jobs. The layer
    /// must fit every handler's job type: a layer typed for one job (a
    /// [`CooldownLayer`](crate::cooldown::CooldownLayer) reading `JobRequest<CallWebhook>`)
    /// goes to [`handler_with`](Self::handler_with) instead.
    pub fn layer<N>(mut self, layer: N) -> WorkerBuilder<Q, B, H, Stack<N, L>, D> {
        self.settings.layered = true;
        WorkerBuilder {
            backend: self.backend,
            handlers: self.handlers,
            layers: Stack::new(layer, self.layers),
            defaults: self.defaults,
            settings: self.settings,
            _queues: PhantomData,
        }
    }

    /// The classifier every layer of every stack reads to decide what an
    /// error means (default: [`DefaultClassifier`](crate::classify::DefaultClassifier)),
    /// after queuey's own intent errors; see
    /// [Precedence](crate::classify#precedence).
    pub fn classifier(mut self, classifier: impl Classify) -> Self {
        self.settings.classifier = SharedClassifier::new(classifier);
        self
    }

    /// At most `n` jobs run at once across all queues of the worker
    /// (default: the sum of the handled queues' prefetch counts). The worker
    /// takes a delivery only when a slot is free.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.settings.concurrency = Some(n);
        self
    }

    /// Takes only the listed shards of the sharded queue `queue` (and its
    /// lane), instead of all of them: for a fleet large enough that each
    /// worker serves part of a queue. The queue's prefetch is split over
    /// the shards listed. Make sure every shard has workers.
    ///
    /// Building fails with [`Error::InvalidConfig`] when the queue is not
    /// sharded, has no shard of a number listed, or has no handler in this
    /// worker. Calling it again for the same queue replaces the list.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use std::sync::Arc;
    /// # use queuey_core::{Job, JobContext, JobError, Queues, handler_fn};
    /// # use queuey_core::memory::MemoryBackend;
    /// # use queuey_tower::Worker;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     #[queue(shards = 8)]
    ///     Orders,
    /// }
    /// # #[derive(Job, Serialize, Deserialize)]
    /// # #[job(queue = AppQueues::Orders)]
    /// # struct ShipOrder { id: u64 }
    ///
    /// // This worker takes shards 0 to 3; another one takes 4 to 7.
    /// let worker = Worker::<AppQueues, _>::builder(Arc::new(MemoryBackend::new()))
    ///     .only_shards(AppQueues::Orders, 0..4)
    ///     .handler(handler_fn(|_: ShipOrder, _: JobContext| async { Ok::<(), JobError>(()) }))
    ///     .build()
    ///     .await?;
    /// # drop(worker);
    /// # Ok(())
    /// # }
    /// ```
    pub fn only_shards(mut self, queue: Q, shards: impl IntoIterator<Item = u16>) -> Self {
        let name = queue.name();
        let shards: Vec<u16> = shards.into_iter().collect();
        self.settings.only_shards.retain(|(own, _)| *own != name);
        self.settings.only_shards.push((name, shards));
        self
    }

    /// The weight of each tenant when the worker takes turns between the
    /// shards of a sharded queue (default: 1 for every tenant).
    ///
    /// A job's [tenant](queuey_core::EnqueueOptions::tenant) picks its
    /// shard, and the worker keeps one delivery of each shard at hand: when
    /// several shards have one, each gets turns in proportion to the weight
    /// of its delivery's tenant (3, 1 and 1 give 60 %, 20 % and 20 % of the
    /// starts); a lone busy tenant gets every turn; a tenant that was quiet
    /// goes next however long the others' backlogs are. Weights are
    /// clamped to 1..=[`MAX_TENANT_WEIGHT`](super::MAX_TENANT_WEIGHT); a job
    /// without a tenant counts as weight 1. The function runs once per job:
    /// keep it cheap (a map lookup).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use std::sync::Arc;
    /// # use queuey_core::{Job, JobContext, JobError, Queues, handler_fn};
    /// # use queuey_core::memory::MemoryBackend;
    /// # use queuey_tower::Worker;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     #[queue(shards = 16)]
    ///     Reports,
    /// }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Reports, tenant = customer)]
    /// struct BuildReport { customer: String }
    ///
    /// let worker = Worker::<AppQueues, _>::builder(Arc::new(MemoryBackend::new()))
    ///     .tenant_weights(|tenant| if tenant == "enterprise" { 3 } else { 1 })
    ///     .handler(handler_fn(|_: BuildReport, _: JobContext| async { Ok::<(), JobError>(()) }))
    ///     .build()
    ///     .await?;
    /// # drop(worker);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tenant_weights(mut self, weights: impl Fn(&str) -> u32 + Send + Sync + 'static) -> Self {
        self.settings.tenant_weights = Some(Arc::new(weights));
        self
    }

    /// How long [`WorkerHandle::shutdown`](super::WorkerHandle::shutdown)
    /// waits for jobs in flight before abandoning them to the broker
    /// (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.settings.shutdown_timeout = timeout;
        self
    }

    /// How long each call of a handler may run before it counts as a
    /// transient failure (default [`DEFAULT_JOB_TIMEOUT`], 5 minutes). It
    /// applies the same way to every handler, whichever method gave it: the
    /// timeout sits right around the handler, inside every layer, so each
    /// attempt gets the whole of it and a timed-out attempt is retried where
    /// the stack retries.
    ///
    /// It must fit under the broker's consumer timeout, which the backend
    /// reports ([`Backend::consumer_timeout`]; RabbitMQ's is 30 minutes by
    /// default): [`build`](Self::build) refuses a job timeout that, with a
    /// margin to settle the job (a tenth of the consumer timeout, at most a
    /// minute), reaches it, since the broker would deliver the job again
    /// while it still runs. See the guide's "Long jobs and the consumer
    /// timeout".
    pub fn job_timeout(mut self, timeout: Duration) -> Self {
        self.settings.job_timeout = Some(timeout);
        self
    }

    /// Consumes the queues of `namespace` (`{namespace}.{queue}`) instead
    /// of the set's own names: the worker sees only jobs enqueued by a
    /// producer of the same namespace, and its retries, deferrals and dead
    /// letters stay in it (`{namespace}.{queue}.dead`, ...). Metrics and
    /// traces carry the namespaced names.
    pub fn namespace(mut self, namespace: Namespace) -> Self {
        self.settings.namespace = namespace;
        self
    }

    /// Gives the keys of unique jobs (see [`Unique`](queuey_core::Unique))
    /// back to `store` once each job is done for good (acknowledged or
    /// dead-lettered), so the next job of its key may be enqueued at once.
    /// Use the store the producers claim keys in; without it each key lasts
    /// its whole window. A store that fails or does not answer within the
    /// [`store_timeout`](Self::store_timeout) leaves the key to expire.
    pub fn store(mut self, store: impl Store) -> Self {
        self.settings.store = Some(Arc::new(store));
        self
    }

    /// How long giving a key back may take (default
    /// [`DEFAULT_STORE_TIMEOUT`]).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.settings.store_timeout = timeout;
        self
    }

    /// Keeps the per-key limits job types declare with
    /// `#[job(limit(..))]` (see [`Job::limits`]) in `store`, and applies
    /// them to those job types' handlers, whichever method gave the handler:
    /// a job of a limited key that must wait is deferred without calling
    /// the handler (see [`limit`](crate::limit)). Give every worker of a
    /// fleet the same store (a Redis store; a
    /// [`MemoryStore`](queuey_core::store::MemoryStore) limits one process).
    /// [`build`](Self::build) fails when a handled job type declares limits
    /// and no limit store was given.
    pub fn limit_store(mut self, store: impl LimitStore) -> Self {
        self.settings.limit_store = Some(Arc::new(store));
        self
    }

    /// Runs without the fleet's control commands: the worker neither
    /// follows nor obeys pauses and cancellations (see
    /// [`queuey_core::control`]). By default a worker follows them when its
    /// backend carries them, and reads every command sent so far before it
    /// consumes anything; use this only for a backend whose user may not
    /// read its commands.
    pub fn without_control(mut self) -> Self {
        self.settings.follow_control = false;
        self
    }

    /// How often the worker sends its [heartbeat](queuey_core::control::Heartbeat)
    /// (default [`DEFAULT_HEARTBEAT_INTERVAL`], 5 seconds): who it is,
    /// what it consumes, the jobs it runs right now and its totals. A
    /// worker that dies drops off the list of workers three intervals after
    /// its last heartbeat (on RabbitMQ, plus two seconds of slack for clocks
    /// that disagree). Refused at build when zero.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.settings.heartbeat_interval = interval;
        self
    }

    /// Fires `periodic`'s job at each tick of its schedule while the worker
    /// runs, once per tick across every worker (and
    /// [`Scheduler`](crate::periodic::Scheduler)) that declares it on the
    /// same broker: the backend's leadership picks one process per
    /// schedule. The job goes to its queue in the worker's
    /// [`namespace`](Self::namespace); the worker need not handle it. See
    /// [`periodic`](crate::periodic).
    ///
    /// The name is checked when the worker is built, and so is that no two
    /// periodic jobs share one.
    pub fn periodic<J>(mut self, periodic: crate::periodic::Periodic<J>) -> Self
    where
        J: Job<Queues = Q>,
        B: queuey_core::periodic::Leadership + Clone,
    {
        self.settings
            .periodic
            .push(PeriodicStart::new(self.backend.clone(), periodic));
        self
    }

    /// Declares the queue set `Q` (in the [`namespace`](Self::namespace), if
    /// one was given) on the backend and returns the worker.
    ///
    /// Fails if no handler was given, if two handle the same job type, if
    /// the concurrency is 0, if [`layer`](Self::layer) was called with no
    /// handler to wrap, if a job type declares limits and no
    /// [limit store](Self::limit_store) was given, or if the [job timeout](Self::job_timeout) does not
    /// fit under the consumer timeout the backend reports for one of the
    /// queues. When more deliveries can be prefetched than there are job
    /// slots, and one could wait for a slot long enough to pass that
    /// consumer timeout, it logs a warning and builds.
    pub async fn build(mut self) -> Result<Worker<Q, B>, Error>
    where
        H: Handlers<Q, D, L>,
    {
        let handlers = self.handlers.len();
        if handlers == 0 && self.settings.layered {
            return Err(Error::invalid_config(
                "layers were added with WorkerBuilder::layer but there is no handler for them \
                 to wrap; add a handler with WorkerBuilder::handler, handler_with or \
                 handler_without_default_stack",
            ));
        }
        if self.settings.heartbeat_interval.is_zero() {
            return Err(Error::invalid_config(
                "the worker's heartbeat interval must be more than zero (the default is 5 seconds)",
            ));
        }
        if let Some(timeout) = self.settings.job_timeout {
            self.defaults.set_job_timeout(timeout)?;
        }
        if let (None, Some(job_type)) = (&self.settings.limit_store, self.handlers.limited()) {
            return Err(Error::invalid_config(format!(
                "job type `{job_type}` declares per-key limits (#[job(limit(..))]) but the \
                 worker has nowhere to keep them; give it a limit store with \
                 WorkerBuilder::limit_store (the same store for every worker of the fleet)"
            )));
        }
        let job_timeout = self.settings.job_timeout.unwrap_or(DEFAULT_JOB_TIMEOUT);
        let frame = Frame {
            defaults: &self.defaults,
            layers: &self.layers,
            job_timeout,
            limit_store: self.settings.limit_store.as_ref(),
        };
        let mut routes = Vec::new();
        self.handlers.into_routes(&frame, &mut routes);
        Worker::new(self.backend, routes, self.settings).await
    }
}

impl<Q, B: std::fmt::Debug, H, L: std::fmt::Debug, D: std::fmt::Debug> std::fmt::Debug
    for WorkerBuilder<Q, B, H, L, D>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("queues", &std::any::type_name::<Q>())
            .field("backend", &self.backend)
            .field("handlers", &std::any::type_name::<H>())
            .field("layers", &self.layers)
            .field("defaults", &self.defaults)
            .field("concurrency", &self.settings.concurrency)
            .field("shutdown_timeout", &self.settings.shutdown_timeout)
            .field("job_timeout", &self.settings.job_timeout)
            .field("classifier", &self.settings.classifier)
            .field("namespace", &self.settings.namespace)
            .field("store", &self.settings.store)
            .finish()
    }
}
