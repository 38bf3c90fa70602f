//! Deferral: `Retry-After` without spending an attempt.
//!
//! [`DeferOn429`](struct@DeferOn429) turns an error carrying a wait (a
//! [`JobError::deferred`](queuey_core::JobError::deferred), or any error the
//! request's [classifier](crate::classify) maps to
//! [`FailureClass::RetryAfter`](crate::classify::FailureClass::RetryAfter))
//! into [`Disposition::Defer`]: the worker holds the job that long, attempt
//! unchanged, deferral count raised, at the queue's top priority. A wait
//! beyond [`LONGEST_WAIT`](queuey_core::LONGEST_WAIT) (24 days) is
//! dead-lettered, never shortened (the job would return before the server
//! asked). Every other error passes through.
//!
//! With [`DeferOn429::max_deferrals`], a job deferred that often fails with
//! [`DeferralLimitReached`](crate::classify::DeferralLimitReached) instead:
//! a transient failure that spends an attempt, whatever your classifier says
//! (see [Precedence](crate::classify#precedence)).
//!
//! [`parse_retry_after`](crate::classify::parse_retry_after) reads an HTTP
//! `Retry-After` value for a classifier or a handler.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use queuey_core::{BoxError, JobContext, JobError, Uuid};
//! use queuey_tower::defer::DeferOn429;
//! use queuey_core::Disposition;
//! use queuey_tower::JobRequest;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! let stack = ServiceBuilder::new()
//!     .layer(DeferOn429.max_deferrals(5))
//!     .service(service_fn(|_: JobRequest<()>| async {
//!         Err::<Disposition, BoxError>(JobError::deferred(Duration::from_secs(30)).into_box_error())
//!     }));
//!
//! let ctx = JobContext::new(Uuid::new_v4(), "q");
//! let answer = stack.clone().oneshot(JobRequest::new((), ctx.clone())).await.unwrap();
//! assert_eq!(answer, Disposition::Defer { delay: Duration::from_secs(30) });
//!
//! let too_often = stack.oneshot(JobRequest::new((), ctx.with_deferrals(5))).await;
//! assert!(too_often.is_err());
//! # }
//! ```

pub mod future;

use queuey_core::{BoxError, Disposition};
use tower_layer::Layer;
use tower_service::Service;

use crate::JobRequest;

/// Turns `Retry-After` errors into deferrals; see the
/// [module documentation](self).
///
/// `DeferOn429` is also a value: the layer with its defaults (defer on every
/// `Retry-After`, without limit), the same as [`DeferOn429::new()`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeferOn429 {
    max_deferrals: Option<u32>,
}

/// The deferral layer with its defaults: defer on every `Retry-After`,
/// without limit.
#[allow(non_upper_case_globals)]
pub const DeferOn429: DeferOn429 = DeferOn429 {
    max_deferrals: None,
};

impl DeferOn429 {
    /// Defers on every `Retry-After`, without limit.
    pub const fn new() -> Self {
        DeferOn429
    }

    /// Fails a job (transiently) instead of deferring it once it was deferred
    /// `max` times.
    pub const fn max_deferrals(mut self, max: u32) -> Self {
        self.max_deferrals = Some(max);
        self
    }
}

impl<S> Layer<S> for DeferOn429 {
    type Service = Defer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Defer {
            inner,
            max_deferrals: self.max_deferrals,
        }
    }
}

/// The service [`DeferOn429`](struct@DeferOn429) produces.
#[derive(Debug, Clone)]
pub struct Defer<S> {
    inner: S,
    max_deferrals: Option<u32>,
}

impl<S> Defer<S> {
    crate::inner_accessors!();
}

impl<S, J> Service<JobRequest<J>> for Defer<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
{
    crate::disposition_service!(future::ResponseFuture<S::Future>);

    fn call(&mut self, request: JobRequest<J>) -> Self::Future {
        future::ResponseFuture {
            deferrals: request.ctx().deferrals(),
            max_deferrals: self.max_deferrals,
            classifier: request.classifier().clone(),
            inner: self.inner.call(request),
        }
    }
}
