//! Assembling a worker: handlers, layers, limits.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::{Backend, BoxError, Error, Job, JobHandler, Queues};
use tower::timeout::{Timeout, TimeoutLayer};
use tower_layer::{Identity, Layer, Stack};
use tower_service::Service;

use super::Worker;
use super::route::{Route, TypedRoute};
use crate::classify::DefaultClassifier;
use crate::dead_letter::DeadLetter;
use crate::defer::Defer;
use crate::metrics::Metrics;
use crate::retry::Retry;
use crate::trace::Trace;
use crate::{
    DeadLetterLayer, DeferOn429, Disposition, HandlerService, JobRequest, MetricsLayer, RetryLayer,
    TraceLayer,
};

/// How long a job may run in the default stack before it counts as a
/// transient failure.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(300);
/// How long shutdown waits for jobs in flight by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// The stack a worker puts around each handler when no `.layer(..)` was
/// given, outermost first:
///
/// 1. [`TraceLayer`]: one span per job, an event for its outcome;
/// 2. [`MetricsLayer`]: counts final outcomes and times jobs;
/// 3. [`DeadLetterLayer`]: whatever error is left becomes a dead letter;
/// 4. [`RetryLayer`] with [`RetryPolicy::default`](queuey_core::RetryPolicy::default)
///    (unless the job type or queue sets a policy);
/// 5. [`DeferOn429`]: `JobError::deferred` becomes a deferral;
/// 6. a timeout of [`DEFAULT_JOB_TIMEOUT`] (see
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
    type Service =
        Trace<Metrics<DeadLetter<Retry<Defer<Timeout<S>, DefaultClassifier>, DefaultClassifier>>>>;

    fn layer(&self, inner: S) -> Self::Service {
        let service = TimeoutLayer::new(self.job_timeout).layer(inner);
        let service = DeferOn429::new().layer(service);
        let service = RetryLayer::default().layer(service);
        let service = DeadLetterLayer::new().layer(service);
        let service = MetricsLayer::new().layer(service);
        TraceLayer::new().layer(service)
    }
}

/// The layers of a [`WorkerBuilder`]: the [`DefaultStack`] until the first
/// [`layer`](WorkerBuilder::layer) call, then exactly the layers given.
pub trait Layers: sealed::Sealed {
    /// The layers with `N` added innermost.
    type With<N>;

    /// Adds a layer innermost.
    fn with<N>(self, layer: N) -> Self::With<N>;

    /// Sets the job timeout of the default stack; other stacks ignore it.
    fn set_job_timeout(&mut self, _timeout: Duration) {}
}

impl Layers for DefaultStack {
    type With<N> = Stack<N, Identity>;

    fn with<N>(self, layer: N) -> Self::With<N> {
        Stack::new(layer, Identity::new())
    }

    fn set_job_timeout(&mut self, timeout: Duration) {
        self.job_timeout = timeout;
    }
}

impl<I, O> Layers for Stack<I, O> {
    type With<N> = Stack<N, Stack<I, O>>;

    fn with<N>(self, layer: N) -> Self::With<N> {
        Stack::new(layer, self)
    }
}

/// The handlers of a [`WorkerBuilder`], collected by
/// [`handler`](WorkerBuilder::handler); each gets the builder's layers
/// around it when the worker is built.
pub trait Handlers<Q, L>: sealed::IntoRoutes<Q, L> {}

impl<Q, L, T: sealed::IntoRoutes<Q, L>> Handlers<Q, L> for T {}

impl<Q, L> sealed::IntoRoutes<Q, L> for () {
    fn into_routes(self, _: &L, _: &mut Vec<Arc<dyn Route>>) {}
}

impl<Q, L, H, Rest> sealed::IntoRoutes<Q, L> for (HandlerService<H>, Rest)
where
    Q: Queues,
    H: JobHandler,
    H::Job: Job<Queues = Q>,
    L: Layer<HandlerService<H>>,
    L::Service: Service<JobRequest<H::Job>, Response = Disposition, Error = BoxError>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as Service<JobRequest<H::Job>>>::Future: Send + 'static,
    Rest: sealed::IntoRoutes<Q, L>,
{
    fn into_routes(self, layers: &L, routes: &mut Vec<Arc<dyn Route>>) {
        let (handler, rest) = self;
        rest.into_routes(layers, routes);
        routes.push(Arc::new(TypedRoute::<H::Job, _>::new(
            layers.layer(handler),
        )));
    }
}

mod sealed {
    use std::sync::Arc;

    use super::Route;

    pub trait Sealed {}
    impl Sealed for super::DefaultStack {}
    impl<I, O> Sealed for tower_layer::Stack<I, O> {}

    pub trait IntoRoutes<Q, L> {
        fn into_routes(self, layers: &L, routes: &mut Vec<Arc<dyn Route>>);
    }
}

/// Builds a [`Worker`]; start with [`Worker::builder`].
pub struct WorkerBuilder<Q, B, H = (), L = DefaultStack> {
    backend: B,
    handlers: H,
    layers: L,
    services: Vec<Arc<dyn Route>>,
    concurrency: Option<usize>,
    shutdown_timeout: Duration,
    _queues: PhantomData<fn() -> Q>,
}

impl<Q: Queues, B: Backend> WorkerBuilder<Q, B> {
    pub(crate) fn new(backend: B) -> Self {
        WorkerBuilder {
            backend,
            handlers: (),
            layers: DefaultStack::default(),
            services: Vec::new(),
            concurrency: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            _queues: PhantomData,
        }
    }
}

impl<Q: Queues, B: Backend, H, L: Layers> WorkerBuilder<Q, B, H, L> {
    /// Handles jobs of `H::Job` with `handler`, inside the builder's layers
    /// (the [`DefaultStack`] unless [`layer`](Self::layer) is called, before
    /// or after this). The worker consumes the job type's queue.
    pub fn handler<Hd>(self, handler: Hd) -> WorkerBuilder<Q, B, (HandlerService<Hd>, H), L>
    where
        Hd: JobHandler,
        Hd::Job: Job<Queues = Q>,
    {
        WorkerBuilder {
            backend: self.backend,
            handlers: (HandlerService::new(handler), self.handlers),
            layers: self.layers,
            services: self.services,
            concurrency: self.concurrency,
            shutdown_timeout: self.shutdown_timeout,
            _queues: PhantomData,
        }
    }

    /// Adds a layer around every handler. The first call replaces the
    /// [`DefaultStack`]; layers added first are outermost, as with
    /// `tower::ServiceBuilder` (which is itself a layer, so a whole
    /// `ServiceBuilder` can be passed at once).
    pub fn layer<N>(self, layer: N) -> WorkerBuilder<Q, B, H, L::With<N>> {
        WorkerBuilder {
            backend: self.backend,
            handlers: self.handlers,
            layers: self.layers.with(layer),
            services: self.services,
            concurrency: self.concurrency,
            shutdown_timeout: self.shutdown_timeout,
            _queues: PhantomData,
        }
    }

    /// Handles jobs of `J` with a complete stack of your own: no layer of
    /// the builder is added around it, so it must answer every request with a
    /// [`Disposition`] or an error (which the worker dead-letters).
    pub fn service<J, S>(mut self, service: S) -> Self
    where
        J: Job<Queues = Q>,
        S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        self.services
            .push(Arc::new(TypedRoute::<J, S>::new(service)));
        self
    }

    /// At most `n` jobs run at once across all queues of the worker
    /// (default: the sum of the handled queues' prefetch counts). The worker
    /// takes a delivery only when a slot is free.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n);
        self
    }

    /// How long [`WorkerHandle::shutdown`](super::WorkerHandle::shutdown)
    /// waits for jobs in flight before abandoning them to the broker
    /// (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The per-attempt timeout of the [`DefaultStack`] (default 5 minutes).
    /// With layers of your own, add `tower::timeout::TimeoutLayer` yourself.
    pub fn job_timeout(mut self, timeout: Duration) -> Self {
        self.layers.set_job_timeout(timeout);
        self
    }

    /// Declares the queue set `Q` on the backend and returns the worker.
    ///
    /// Fails if no handler or service was given, if two handle the same job
    /// type, or if the concurrency is 0.
    pub async fn build(self) -> Result<Worker<Q, B>, Error>
    where
        H: Handlers<Q, L>,
    {
        let mut routes = Vec::new();
        self.handlers.into_routes(&self.layers, &mut routes);
        routes.extend(self.services);
        Worker::new(
            self.backend,
            routes,
            self.concurrency,
            self.shutdown_timeout,
        )
        .await
    }
}

impl<Q, B: std::fmt::Debug, H, L: std::fmt::Debug> std::fmt::Debug for WorkerBuilder<Q, B, H, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("queues", &std::any::type_name::<Q>())
            .field("backend", &self.backend)
            .field("handlers", &std::any::type_name::<H>())
            .field("layers", &self.layers)
            .field("services", &self.services.len())
            .field("concurrency", &self.concurrency)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish()
    }
}
