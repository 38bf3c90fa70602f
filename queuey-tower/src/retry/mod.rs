//! Retries with backoff, waiting on the broker.
//!
//! [`RetryLayer`](struct@RetryLayer) turns a transient failure (as the
//! request's [classifier](crate::classify) says) into [`Disposition::Retry`]
//! while the job has attempts left, then into [`Disposition::DeadLetter`]
//! with the reason `attempts exhausted (n of m): <error>`. Fatal failures
//! and deferrals pass through as errors for the layers around it
//! ([`DeadLetterLayer`](crate::dead_letter::DeadLetterLayer),
//! [`DeferOn429`](struct@crate::defer::DeferOn429)). Each retry is logged at
//! WARN (error, `queue`, `job_type`, `job_id`, attempt, delay) and recorded
//! in the next attempt's [`Envelope::errors`](queuey_core::Envelope::errors),
//! so a dead letter tells every attempt's error.
//!
//! A backoff longer than [`LONGEST_WAIT`](queuey_core::LONGEST_WAIT) (only a
//! hand-built `Backoff::Fixed` can be) is dead-lettered, never shortened.
//!
//! Unlike `tower::retry`, nothing waits in memory: the worker publishes the
//! next attempt to a hold queue (delay: the policy's jittered backoff) and
//! acknowledges, so a retry costs no prefetch slot and survives a crash.
//!
//! The policy is the job type's (`#[job(retry(..))]`), else its queue's
//! (`#[queue(retry(..))]`), else the layer's own; the layer alone decides,
//! and records the attempt count in the request's
//! [`JobContext`](queuey_core::JobContext) so the handler sees the
//! `max_attempts` that holds (one without a retry layer).
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use queuey_core::{Backoff, BoxError, JobContext, JobError, RetryPolicy, Uuid};
//! use queuey_core::Disposition;
//! use queuey_tower::JobRequest;
//! use queuey_tower::retry::RetryLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! let policy = RetryPolicy::new(3, Backoff::fixed(Duration::from_secs(10)).unwrap()).unwrap();
//! let stack = ServiceBuilder::new()
//!     .layer(RetryLayer::new(policy))
//!     .service(service_fn(|_: JobRequest<()>| async {
//!         Err::<Disposition, BoxError>(JobError::retryable("connection reset").into_box_error())
//!     }));
//!
//! let ctx = JobContext::new(Uuid::new_v4(), "q");
//! let first = stack.clone().oneshot(JobRequest::new((), ctx.clone())).await.unwrap();
//! assert_eq!(first, Disposition::Retry { delay: Duration::from_secs(10) });
//!
//! let last = stack.oneshot(JobRequest::new((), ctx.with_attempt(3))).await.unwrap();
//! assert_eq!(
//!     last,
//!     Disposition::DeadLetter { reason: "attempts exhausted (3 of 3): connection reset".into() }
//! );
//! # }
//! ```

pub mod future;
mod layer;

use std::sync::Arc;

use queuey_core::{BoxError, Disposition, RetryPolicy};
use tower_service::Service;

pub use layer::RetryLayer;

use crate::JobRequest;
use crate::job_fields::JobFields;

/// The service [`RetryLayer`](struct@RetryLayer) produces.
#[derive(Debug, Clone)]
pub struct Retry<S> {
    inner: S,
    policy: Arc<RetryPolicy>,
}

impl<S> Retry<S> {
    /// Wraps `inner` with the given fallback policy.
    pub fn new(inner: S, policy: Arc<RetryPolicy>) -> Self {
        Retry { inner, policy }
    }

    crate::inner_accessors!();
}

impl<S, J> Service<JobRequest<J>> for Retry<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
{
    crate::disposition_service!(future::ResponseFuture<S::Future>);

    fn call(&mut self, mut request: JobRequest<J>) -> Self::Future {
        let policy = request
            .retry_policy()
            .map_or_else(|| Arc::clone(&self.policy), Arc::clone);
        request.ctx_mut().set_max_attempts(policy.max_attempts());
        future::ResponseFuture {
            job: JobFields::if_recorded(&request, tracing::Level::WARN),
            attempt: request.ctx().attempt(),
            classifier: request.classifier().clone(),
            failure: request.failure().cloned(),
            policy,
            inner: self.inner.call(request),
        }
    }
}
