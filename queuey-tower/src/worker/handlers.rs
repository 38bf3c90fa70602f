//! The handlers a builder collected, each with the shape of its stack.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::store::LimitStore;
use queuey_core::{BoxError, Disposition, Job, JobHandler, Queues};
use tower::timeout::Timeout;
use tower_layer::Layer;
use tower_service::Service;

use super::route::{Route, TypedRoute};
use super::stack::WithDefaults;
use crate::limit::{Declared, declared};
use crate::{HandlerService, JobRequest};

/// The handlers of a [`WorkerBuilder`](super::WorkerBuilder), collected by
/// its `handler*` methods; each gets its stack when the worker is built.
pub trait Handlers<Q, D, L>: sealed::IntoRoutes<Q, D, L> {}

impl<Q, D, L, T: sealed::IntoRoutes<Q, D, L>> Handlers<Q, D, L> for T {}

/// What every handler's stack is built from: the builder's defaults, its
/// layers (around every handler) and the job timeout.
#[allow(unreachable_pub, missing_debug_implementations)]
pub struct Frame<'a, D, L> {
    pub(crate) defaults: &'a D,
    pub(crate) layers: &'a L,
    pub(crate) job_timeout: Duration,
    pub(crate) limit_store: Option<&'a Arc<dyn LimitStore>>,
}

/// A handler given with [`handler_with`](super::WorkerBuilder::handler_with):
/// its layers go inside the default stack.
#[allow(unreachable_pub, missing_debug_implementations)]
pub struct WithLayer<H, U> {
    pub(crate) handler: HandlerService<H>,
    pub(crate) layer: U,
}

/// A handler given with
/// [`handler_without_default_stack`](super::WorkerBuilder::handler_without_default_stack):
/// its layers replace the default stack.
#[allow(unreachable_pub, missing_debug_implementations)]
pub struct InsteadOfDefaults<H, U> {
    pub(crate) handler: HandlerService<H>,
    pub(crate) layer: U,
}

/// One handler and the stack it gets.
#[allow(unreachable_pub)]
pub trait Entry<D, L> {
    /// The job type.
    type Job: Job;
    /// The stack around the handler, before the builder's layers.
    type Stack;

    /// Builds the stack around the handler.
    fn stack(self, frame: &Frame<'_, D, L>) -> Self::Stack;
}

/// A handler with the limits its job type declares (see
/// [`WorkerBuilder::limit_store`](super::WorkerBuilder::limit_store)).
type Limited<H> = Declared<<H as JobHandler>::Job, HandlerService<H>>;

/// `.handler(h)`: the default stack (or nothing, once it was removed).
impl<D, L, H> Entry<D, L> for HandlerService<H>
where
    H: JobHandler,
    D: Layer<Limited<H>>,
{
    type Job = H::Job;
    type Stack = D::Service;

    fn stack(self, frame: &Frame<'_, D, L>) -> Self::Stack {
        frame.defaults.layer(declared(frame.limit_store, self))
    }
}

/// `.handler_with(h, layer)`: `layer` inside the default stack.
impl<D, L, H, U> Entry<D, L> for WithLayer<H, U>
where
    H: JobHandler,
    D: WithDefaults<U, Limited<H>>,
{
    type Job = H::Job;
    type Stack = D::Service;

    fn stack(self, frame: &Frame<'_, D, L>) -> Self::Stack {
        let handler = declared(frame.limit_store, self.handler);
        frame.defaults.with_layer(&self.layer, handler)
    }
}

/// `.handler_without_default_stack(h, layer)`: `layer` around the job
/// timeout around the handler.
impl<D, L, H, U> Entry<D, L> for InsteadOfDefaults<H, U>
where
    H: JobHandler,
    U: Layer<Timeout<Limited<H>>>,
{
    type Job = H::Job;
    type Stack = U::Service;

    fn stack(self, frame: &Frame<'_, D, L>) -> Self::Stack {
        let handler = declared(frame.limit_store, self.handler);
        self.layer.layer(Timeout::new(handler, frame.job_timeout))
    }
}

impl<Q, D, L> sealed::IntoRoutes<Q, D, L> for () {
    fn into_routes(self, _: &Frame<'_, D, L>, _: &mut Vec<Box<dyn Route>>) {}

    fn len(&self) -> usize {
        0
    }

    fn limited(&self) -> Option<&'static str> {
        None
    }
}

impl<Q, D, L, E, Rest> sealed::IntoRoutes<Q, D, L> for (E, Rest)
where
    Q: Queues,
    E: Entry<D, L>,
    E::Job: Job<Queues = Q>,
    L: Layer<E::Stack>,
    L::Service:
        Service<JobRequest<E::Job>, Response = Disposition, Error = BoxError> + Send + 'static,
    <L::Service as Service<JobRequest<E::Job>>>::Future: Send + 'static,
    Rest: sealed::IntoRoutes<Q, D, L>,
{
    fn into_routes(self, frame: &Frame<'_, D, L>, routes: &mut Vec<Box<dyn Route>>) {
        let (entry, rest) = self;
        rest.into_routes(frame, routes);
        let stack = frame.layers.layer(entry.stack(frame));
        routes.push(Box::new(TypedRoute::<E::Job, _>::new(stack)));
    }

    fn len(&self) -> usize {
        1 + self.1.len()
    }

    fn limited(&self) -> Option<&'static str> {
        let declares = <E::Job as Job>::limits().is_some_and(|limits| !limits.is_empty());
        declares
            .then_some(<E::Job as Job>::NAME)
            .or_else(|| self.1.limited())
    }
}

pub(crate) mod sealed {
    use super::{Frame, Route};

    pub trait IntoRoutes<Q, D, L> {
        fn into_routes(self, frame: &Frame<'_, D, L>, routes: &mut Vec<Box<dyn Route>>);

        fn len(&self) -> usize;

        /// A job type among them that declares per-key limits.
        fn limited(&self) -> Option<&'static str>;
    }
}
