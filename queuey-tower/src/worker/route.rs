//! A job type's way through the worker, with its type erased.

use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use queuey_core::{BoxError, Envelope, Job, JobContext, Queues, RetryPolicy};
use tower::ServiceExt;
use tower_service::Service;

use crate::{Disposition, JobRequest};

/// The future of one job through its stack.
pub(crate) type JobFuture = BoxFuture<'static, Result<Disposition, BoxError>>;

/// A stack, ready to take one job.
// `pub` in a private module: it appears in the sealed `Handlers` trait.
#[allow(unreachable_pub)]
pub trait ReadyRoute: Send {
    /// Decodes the job and starts it. An `Err` is a dead-letter reason: the
    /// payload is not this job type.
    fn call(
        self: Box<Self>,
        envelope: &Envelope,
        queue: &Arc<str>,
        redelivered: bool,
    ) -> Result<JobFuture, String>;
}

/// One job type's stack.
#[allow(unreachable_pub)]
pub trait Route: Send + Sync {
    fn job_type(&self) -> &'static str;
    fn queue(&self) -> &'static str;
    /// Waits until the stack can take a job.
    fn ready(&self) -> BoxFuture<'static, Result<Box<dyn ReadyRoute>, BoxError>>;
}

pub(crate) struct TypedRoute<J, S> {
    service: S,
    /// The job type's policy, else its queue's.
    retry: Option<Arc<RetryPolicy>>,
    _job: PhantomData<fn(J)>,
}

impl<J: Job, S> TypedRoute<J, S> {
    pub(crate) fn new(service: S) -> Self {
        let retry = J::retry_policy()
            .or_else(|| J::QUEUE.config().retry_policy().cloned())
            .map(Arc::new);
        TypedRoute {
            service,
            retry,
            _job: PhantomData,
        }
    }
}

impl<J, S> Route for TypedRoute<J, S>
where
    J: Job,
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    fn job_type(&self) -> &'static str {
        J::NAME
    }

    fn queue(&self) -> &'static str {
        J::QUEUE.name()
    }

    fn ready(&self) -> BoxFuture<'static, Result<Box<dyn ReadyRoute>, BoxError>> {
        // Readiness belongs to the instance that was polled (a concurrency
        // limit's permit, say), so the ready clone is the one that is called.
        let service = self.service.clone();
        let retry = self.retry.clone();
        Box::pin(async move {
            let service = service.ready_oneshot().await?;
            Ok(Box::new(Ready::<J, S> {
                service,
                retry,
                _job: PhantomData,
            }) as Box<dyn ReadyRoute>)
        })
    }
}

struct Ready<J, S> {
    service: S,
    retry: Option<Arc<RetryPolicy>>,
    _job: PhantomData<fn(J)>,
}

impl<J, S> ReadyRoute for Ready<J, S>
where
    J: Job,
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError> + Send + 'static,
    S::Future: Send + 'static,
{
    fn call(
        mut self: Box<Self>,
        envelope: &Envelope,
        queue: &Arc<str>,
        redelivered: bool,
    ) -> Result<JobFuture, String> {
        let job: J = envelope
            .payload_as()
            .map_err(|e| format!("payload does not decode as job type `{}`: {e}", J::NAME))?;
        let max_attempts = self.retry.as_ref().map_or(1, |p| p.max_attempts());
        let ctx = JobContext::from_envelope(envelope, Arc::clone(queue), max_attempts, redelivered);
        let mut request = JobRequest::new(job, ctx);
        if let Some(policy) = self.retry.take() {
            request = request.with_retry_policy(policy);
        }
        Ok(Box::pin(self.service.call(request)))
    }
}
