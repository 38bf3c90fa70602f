//! Assembling a worker: handlers, layers, limits.

use std::marker::PhantomData;
use std::time::Duration;

use queuey_core::{Backend, BoxError, Error, Job, JobHandler, Namespace, Queues};
use tower::timeout::{Timeout, TimeoutLayer};
use tower_layer::{Identity, Layer, Stack};
use tower_service::Service;

use super::Worker;
use super::reconnect::{DEFAULT_RECONNECT_DEADLINE, Reconnect};
use super::route::{Route, TypedRoute};
use crate::classify::{Classify, SharedClassifier};
use crate::dead_letter::DeadLetter;
use crate::deadline::Deadline;
use crate::defer::Defer;
use crate::metrics::Metrics;
use crate::retry::Retry;
use crate::trace::Trace;
use crate::{
    DeadLetterLayer, DeadlineLayer, DeferOn429, Disposition, HandlerService, JobRequest,
    MetricsLayer, RetryLayer, TraceLayer,
};

/// How long a job may run in the default stack before it counts as a
/// transient failure.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(300);
/// How long shutdown waits for jobs in flight by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// The stack a worker puts around each handler, inside the layers added
/// with [`WorkerBuilder::layer`] (unless
/// [`WorkerBuilder::without_default_stack`] removed it), outermost first:
///
/// 1. [`TraceLayer`]: one span per job, an event for its outcome;
/// 2. [`MetricsLayer`]: counts final outcomes and times jobs;
/// 3. [`DeadLetterLayer`]: whatever error is left becomes a dead letter;
/// 4. [`DeadlineLayer`]: a job past its deadline (see
///    [`EnqueueOptions::deadline`](queuey_core::EnqueueOptions::deadline)) is
///    dead-lettered instead of run, retried or deferred; jobs without one
///    pass untouched;
/// 5. [`RetryLayer`](struct@RetryLayer) with [`RetryPolicy::default`](queuey_core::RetryPolicy::default)
///    (unless the job type or queue sets a policy);
/// 6. [`DeferOn429`](struct@DeferOn429): `JobError::deferred` becomes a deferral;
/// 7. a timeout of [`DEFAULT_JOB_TIMEOUT`] (see
///    [`WorkerBuilder::job_timeout`]) on each attempt, which counts as a
///    transient failure. RabbitMQ 4.3 no longer times out classic-queue
///    consumers, so without it a hung handler would hold its prefetch slot
///    for ever.
#[derive(Debug, Clone)]
pub struct DefaultStack {
    job_timeout: Duration,
}

impl Default for DefaultStack {
    fn default() -> Self {
        DefaultStack {
            job_timeout: DEFAULT_JOB_TIMEOUT,
        }
    }
}

impl<S> Layer<S> for DefaultStack {
    type Service = Trace<Metrics<DeadLetter<Deadline<Retry<Defer<Timeout<S>>>>>>>;

    fn layer(&self, inner: S) -> Self::Service {
        let service = TimeoutLayer::new(self.job_timeout).layer(inner);
        let service = DeferOn429.layer(service);
        let service = RetryLayer.layer(service);
        let service = DeadlineLayer::new().layer(service);
        let service = DeadLetterLayer::new().layer(service);
        let service = MetricsLayer::new().layer(service);
        TraceLayer::new().layer(service)
    }
}

/// The default stack of a [`WorkerBuilder`], or nothing once
/// [`without_default_stack`](WorkerBuilder::without_default_stack) removed
/// it.
pub trait Defaults: sealed::Sealed {
    /// Applies [`WorkerBuilder::job_timeout`]; refused where nothing would
    /// read it.
    fn set_job_timeout(&mut self, timeout: Duration) -> Result<(), Error>;
}

impl Defaults for DefaultStack {
    fn set_job_timeout(&mut self, timeout: Duration) -> Result<(), Error> {
        self.job_timeout = timeout;
        Ok(())
    }
}

impl Defaults for Identity {
    fn set_job_timeout(&mut self, _: Duration) -> Result<(), Error> {
        Err(Error::invalid_config(
            "job_timeout is set but the default stack was removed \
             (without_default_stack), so nothing would apply it; add \
             tower::timeout::TimeoutLayer to your layers instead",
        ))
    }
}

/// The handlers of a [`WorkerBuilder`], collected by
/// [`handler`](WorkerBuilder::handler); each gets the builder's layers
/// around the default stack around it when the worker is built.
pub trait Handlers<Q, D, L>: sealed::IntoRoutes<Q, D, L> {}

impl<Q, D, L, T: sealed::IntoRoutes<Q, D, L>> Handlers<Q, D, L> for T {}

impl<Q, D, L> sealed::IntoRoutes<Q, D, L> for () {
    fn into_routes(self, _: &D, _: &L, _: &mut Vec<Box<dyn Route>>) {}

    fn len(&self) -> usize {
        0
    }
}

impl<Q, D, L, H, Rest> sealed::IntoRoutes<Q, D, L> for (HandlerService<H>, Rest)
where
    Q: Queues,
    H: JobHandler,
    H::Job: Job<Queues = Q>,
    D: Layer<HandlerService<H>>,
    L: Layer<D::Service>,
    L::Service:
        Service<JobRequest<H::Job>, Response = Disposition, Error = BoxError> + Send + 'static,
    <L::Service as Service<JobRequest<H::Job>>>::Future: Send + 'static,
    Rest: sealed::IntoRoutes<Q, D, L>,
{
    fn into_routes(self, defaults: &D, layers: &L, routes: &mut Vec<Box<dyn Route>>) {
        let (handler, rest) = self;
        rest.into_routes(defaults, layers, routes);
        let stack = layers.layer(defaults.layer(handler));
        routes.push(Box::new(TypedRoute::<H::Job, _>::new(stack)));
    }

    fn len(&self) -> usize {
        1 + self.1.len()
    }
}

mod sealed {
    use super::Route;

    pub trait Sealed {}
    impl Sealed for super::DefaultStack {}
    impl Sealed for tower_layer::Identity {}

    pub trait IntoRoutes<Q, D, L> {
        fn into_routes(self, defaults: &D, layers: &L, routes: &mut Vec<Box<dyn Route>>);

        fn len(&self) -> usize;
    }
}

/// Builds a [`Worker`]; start with [`Worker::builder`].
///
/// A worker runs each job type through one stack, outermost first: the
/// layers given to [`layer`](Self::layer), then the [`DefaultStack`], then
/// the handler. [`service`](Self::service) takes a complete stack of your
/// own instead, for one job type.
pub struct WorkerBuilder<Q, B, H = (), L = Identity, D = DefaultStack> {
    backend: B,
    handlers: H,
    layers: L,
    defaults: D,
    settings: Settings,
    _queues: PhantomData<fn() -> Q>,
}

/// What a builder keeps whatever its type parameters.
struct Settings {
    /// Whether `layer` was called.
    layered: bool,
    services: Vec<Box<dyn Route>>,
    concurrency: Option<usize>,
    shutdown_timeout: Duration,
    job_timeout: Option<Duration>,
    classifier: SharedClassifier,
    reconnect: Reconnect,
    namespace: Namespace,
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
                services: Vec::new(),
                concurrency: None,
                shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
                job_timeout: None,
                classifier: SharedClassifier::default(),
                reconnect: Reconnect::new(DEFAULT_RECONNECT_DEADLINE),
                namespace: Namespace::root(),
            },
            _queues: PhantomData,
        }
    }
}

impl<Q: Queues, B: Backend, H, L, D: Defaults> WorkerBuilder<Q, B, H, L, D> {
    /// Handles jobs of `H::Job` with `handler`, inside the builder's layers
    /// and the [`DefaultStack`] (whether [`layer`](Self::layer) is called
    /// before or after this). The worker consumes the job type's queue.
    pub fn handler<Hd>(self, handler: Hd) -> WorkerBuilder<Q, B, (HandlerService<Hd>, H), L, D>
    where
        Hd: JobHandler,
        Hd::Job: Job<Queues = Q>,
    {
        WorkerBuilder {
            backend: self.backend,
            handlers: (HandlerService::new(handler), self.handlers),
            layers: self.layers,
            defaults: self.defaults,
            settings: self.settings,
            _queues: PhantomData,
        }
    }

    /// Adds a layer around every handler's stack, **outside** the
    /// [`DefaultStack`], which stays. Layers added first are outermost, as
    /// with `tower::ServiceBuilder` (which is itself a layer, so a whole
    /// `ServiceBuilder` can be passed at once).
    ///
    /// Each job type gets its own instance of the layers (a
    /// `ConcurrencyLimitLayer` limits each job type on its own); one
    /// instance serves every job of its type, so middleware state (a rate
    /// limit's window, a counter of yours) persists across jobs.
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

    /// Removes the [`DefaultStack`]: handlers get only the layers given to
    /// [`layer`](Self::layer). An error reaching the worker is then
    /// dead-lettered (or deferred, if the classifier calls it a wait), and
    /// [`job_timeout`](Self::job_timeout) is refused at build time, since
    /// nothing would apply it.
    pub fn without_default_stack(self) -> WorkerBuilder<Q, B, H, L, Identity> {
        WorkerBuilder {
            backend: self.backend,
            handlers: self.handlers,
            layers: self.layers,
            defaults: Identity::new(),
            settings: self.settings,
            _queues: PhantomData,
        }
    }

    /// Handles jobs of `J` with a complete stack of your own, such as
    /// `ServiceBuilder::new().layer(RetryLayer).layer(DeferOn429).service(handler.into_service())`:
    /// neither the builder's layers nor the default stack are added around
    /// it. It must answer every request with a [`Disposition`] or an error
    /// (which the worker dead-letters, or defers if the classifier calls it
    /// a wait).
    ///
    /// The worker owns the stack and polls it ready before taking each
    /// delivery, so it need not be `Clone` or `Sync`: `RateLimit`,
    /// `BoxService` and middleware of your own with state all fit.
    pub fn service<J, S>(mut self, service: S) -> Self
    where
        J: Job<Queues = Q>,
        S: Service<JobRequest<J>, Response = Disposition, Error = BoxError> + Send + 'static,
        S::Future: Send + 'static,
    {
        self.settings
            .services
            .push(Box::new(TypedRoute::<J, S>::new(service)));
        self
    }

    /// The classifier every layer of every stack reads to decide what an
    /// error means (default: [`DefaultClassifier`](crate::classify::DefaultClassifier));
    /// see [`classify`](crate::classify).
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

    /// How long [`WorkerHandle::shutdown`](super::WorkerHandle::shutdown)
    /// waits for jobs in flight before abandoning them to the broker
    /// (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.settings.shutdown_timeout = timeout;
        self
    }

    /// The per-attempt timeout of the [`DefaultStack`] (default 5 minutes).
    /// Refused at build time when nothing would apply it: after
    /// [`without_default_stack`](Self::without_default_stack), or with no
    /// handler (a stack given to [`service`](Self::service) is complete:
    /// add `tower::timeout::TimeoutLayer` to it).
    pub fn job_timeout(mut self, timeout: Duration) -> Self {
        self.settings.job_timeout = Some(timeout);
        self
    }

    /// How long a queue whose consumer was lost keeps trying to consume
    /// again before [`Worker::run`] gives up with
    /// [`WorkerError::ReconnectDeadline`](super::WorkerError::ReconnectDeadline)
    /// (default 10 minutes; `None`: for ever). Errors that cannot heal
    /// (credentials refused, a queue refused, a backend that gave up) stop
    /// the worker at once.
    pub fn reconnect_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.settings.reconnect = Reconnect::new(deadline);
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

    /// Declares the queue set `Q` (in the [`namespace`](Self::namespace), if
    /// one was given) on the backend and returns the worker.
    ///
    /// Fails if no handler or service was given, if two handle the same job
    /// type, if the concurrency is 0, or if a setting would be ignored
    /// ([`layer`](Self::layer) or [`job_timeout`](Self::job_timeout) with no
    /// handler to apply them to, `job_timeout` without the default stack).
    pub async fn build(mut self) -> Result<Worker<Q, B>, Error>
    where
        H: Handlers<Q, D, L>,
    {
        let handlers = self.handlers.len();
        if handlers == 0 && self.settings.layered {
            return Err(Error::invalid_config(
                "layers were added with WorkerBuilder::layer but there is no handler for them \
                 to wrap; a stack given to WorkerBuilder::service is complete: put the layers \
                 in it",
            ));
        }
        if let Some(timeout) = self.settings.job_timeout {
            if handlers == 0 {
                return Err(Error::invalid_config(
                    "job_timeout is set but there is no handler to apply it to; a stack given \
                     to WorkerBuilder::service is complete: add tower::timeout::TimeoutLayer \
                     to it",
                ));
            }
            self.defaults.set_job_timeout(timeout)?;
            if !self.settings.services.is_empty() {
                tracing::warn!(
                    ?timeout,
                    "job_timeout applies to the handlers' default stack only, not to the \
                     stacks given to WorkerBuilder::service"
                );
            }
        }
        let mut handlers = Vec::new();
        self.handlers
            .into_routes(&self.defaults, &self.layers, &mut handlers);
        handlers.extend(self.settings.services);
        Worker::new(
            self.backend,
            handlers,
            super::Settings {
                concurrency: self.settings.concurrency,
                shutdown_timeout: self.settings.shutdown_timeout,
                classifier: self.settings.classifier,
                reconnect: self.settings.reconnect,
                namespace: self.settings.namespace,
            },
        )
        .await
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
            .field("services", &self.settings.services.len())
            .field("concurrency", &self.settings.concurrency)
            .field("shutdown_timeout", &self.settings.shutdown_timeout)
            .field("job_timeout", &self.settings.job_timeout)
            .field("classifier", &self.settings.classifier)
            .field("namespace", &self.settings.namespace)
            .finish()
    }
}
