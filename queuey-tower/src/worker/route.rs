//! A job type's way through the worker, with its type erased.

use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use queuey_core::{BoxError, Disposition, Envelope, Job, JobContext, Queues, RetryPolicy};
use tower_service::Service;

use super::wing::Extras;
use crate::JobRequest;
use crate::classifier::SharedClassifier;

/// The future of one job through its stack.
pub(crate) type JobFuture = BoxFuture<'static, Result<Disposition, BoxError>>;

/// One job type's stack, owned by the loop of its queue: polled ready before
/// each delivery is taken, then called with it, as tower's own drivers do.
// `pub` in a private module: it appears in the sealed `Handlers` trait.
#[allow(unreachable_pub)]
pub trait Route: Send {
    /// The job type's name.
    fn job_type(&self) -> &'static str;
    /// The job type's queue.
    fn queue(&self) -> &'static str;
    /// Whether the stack can take a job now.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>>;
    /// How the job type computes its uniqueness from a payload, so that the
    /// worker gives back only keys it can compute again.
    fn declared_unique(&self) -> super::wing::unique::Declared;
    /// Decodes the job and starts it on the stack (polled ready). An `Err` is
    /// a dead-letter reason: the payload is not this job type (the readiness
    /// stays for the next delivery).
    fn call(&mut self, delivered: Delivered<'_>) -> Result<JobFuture, String>;
}

/// What a route needs of a delivery to build its request.
#[allow(unreachable_pub, missing_debug_implementations)]
pub struct Delivered<'a> {
    pub(crate) envelope: &'a Envelope,
    pub(crate) queue: &'a Arc<str>,
    pub(crate) redelivered: bool,
    pub(crate) classifier: &'a SharedClassifier,
    /// What the worker's wings hand the job's context.
    pub(crate) extras: Extras,
}

pub(crate) struct TypedRoute<J, S> {
    service: S,
    /// The job type's own policy (the job's, else its queue's), found once;
    /// a retry layer in the stack decides whether it applies.
    retry: Option<Arc<RetryPolicy>>,
    _job: PhantomData<fn(J)>,
}

impl<J: Job, S> TypedRoute<J, S> {
    pub(crate) fn new(service: S) -> Self {
        let retry = RetryPolicy::for_job::<J>().map(Arc::new);
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
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError> + Send + 'static,
    S::Future: Send + 'static,
{
    fn job_type(&self) -> &'static str {
        J::NAME
    }

    fn queue(&self) -> &'static str {
        J::QUEUE.name()
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.service.poll_ready(cx)
    }

    fn declared_unique(&self) -> super::wing::unique::Declared {
        super::wing::unique::declared::<J>
    }

    fn call(&mut self, mut delivered: Delivered<'_>) -> Result<JobFuture, String> {
        let job: J = delivered
            .envelope
            .payload_as()
            .map_err(|e| format!("payload does not decode as job type `{}`: {e}", J::NAME))?;
        // One attempt unless a retry layer resolves a policy allowing more.
        let ctx = delivered.extras.context(JobContext::from_envelope(
            delivered.envelope,
            Arc::clone(delivered.queue),
            1,
            delivered.redelivered,
        ));
        let mut request = JobRequest::new(job, ctx);
        request.set_job_type(J::NAME);
        if let Some(policy) = &self.retry {
            request = request.with_retry_policy(Arc::clone(policy));
        }
        request.set_classifier(delivered.classifier.clone());
        request.set_slots(delivered.extras.reply, delivered.extras.failure);
        Ok(Box::pin(self.service.call(request)))
    }
}
