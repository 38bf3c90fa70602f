//! The stack a worker puts around a handler, and the three shapes a
//! handler's stack can take.

use std::time::Duration;

use queuey_core::Error;
use tower::timeout::{Timeout, TimeoutLayer};
use tower_layer::{Identity, Layer};

use crate::dead_letter::{DeadLetter, DeadLetterLayer};
use crate::deadline::{Deadline, DeadlineLayer};
use crate::defer::{Defer, DeferOn429};
use crate::metrics::{Metrics, MetricsLayer};
use crate::retry::{Retry, RetryLayer};
use crate::trace::{Trace, TraceLayer};

/// How long one call of a handler may run by default before it counts as a
/// transient failure (see [`WorkerBuilder::job_timeout`](super::WorkerBuilder::job_timeout)).
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// The stack a worker puts around each handler, outermost first:
///
/// 1. [`TraceLayer`]: one span per job, an event for its outcome;
/// 2. [`MetricsLayer`]: counts final outcomes and times jobs;
/// 3. [`DeadLetterLayer`]: whatever error is left becomes a dead letter;
/// 4. [`DeadlineLayer`]: a job past its
///    [deadline](queuey_core::EnqueueOptions::deadline) is dead-lettered
///    instead of run, retried or deferred;
/// 5. [`RetryLayer`](struct@RetryLayer) with [`RetryPolicy::default`](queuey_core::RetryPolicy::default)
///    (unless the job type or queue sets a policy);
/// 6. [`DeferOn429`](struct@DeferOn429): `JobError::deferred` becomes a deferral;
/// 7. the layers given with the handler to
///    [`WorkerBuilder::handler_with`](super::WorkerBuilder::handler_with), if any;
/// 8. a timeout of [`DEFAULT_JOB_TIMEOUT`] (see
///    [`WorkerBuilder::job_timeout`](super::WorkerBuilder::job_timeout)) on
///    each call of the handler, a transient failure: RabbitMQ 4.3 no longer
///    times out classic-queue consumers, so a hung handler would hold its
///    slot for ever.
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

impl DefaultStack {
    /// The default stack with `layer` around the handler's timeout, inside
    /// the deferral layer ([`WorkerBuilder::handler_with`](super::WorkerBuilder::handler_with)).
    fn around<U, S>(&self, layer: &U, inner: S) -> AroundDefaults<U::Service>
    where
        U: Layer<Timeout<S>>,
    {
        let service = TimeoutLayer::new(self.job_timeout).layer(inner);
        let service = layer.layer(service);
        let service = DeferOn429.layer(service);
        let service = RetryLayer.layer(service);
        let service = DeadlineLayer::new().layer(service);
        let service = DeadLetterLayer::new().layer(service);
        let service = MetricsLayer::new().layer(service);
        TraceLayer::new().layer(service)
    }
}

/// The default stack's layers, outermost first, down to the deferral layer.
type AroundDefaults<S> = Trace<Metrics<DeadLetter<Deadline<Retry<Defer<S>>>>>>;

impl<S> Layer<S> for DefaultStack {
    type Service = AroundDefaults<Timeout<S>>;

    fn layer(&self, inner: S) -> Self::Service {
        self.around(&Identity::new(), inner)
    }
}

/// The default stack of a [`WorkerBuilder`](super::WorkerBuilder).
pub trait Defaults: sealed::Sealed {
    /// Applies [`WorkerBuilder::job_timeout`](super::WorkerBuilder::job_timeout);
    /// refused where nothing would read it.
    fn set_job_timeout(&mut self, timeout: Duration) -> Result<(), Error>;
}

impl Defaults for DefaultStack {
    fn set_job_timeout(&mut self, timeout: Duration) -> Result<(), Error> {
        self.job_timeout = timeout;
        Ok(())
    }
}

/// Puts a handler's own layers where they go in a builder's defaults: inside
/// the [`DefaultStack`].
#[allow(unreachable_pub)]
pub trait WithDefaults<U, S>: Defaults {
    /// The stack around the handler.
    type Service;

    /// Builds it.
    fn with_layer(&self, layer: &U, handler: S) -> Self::Service;
}

impl<U: Layer<Timeout<S>>, S> WithDefaults<U, S> for DefaultStack {
    type Service = AroundDefaults<U::Service>;

    fn with_layer(&self, layer: &U, handler: S) -> Self::Service {
        self.around(layer, handler)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DefaultStack {}
}
