//! The last resort: any error becomes a dead letter.
//!
//! [`DeadLetterLayer`] turns every failure that reaches it into
//! [`Disposition::DeadLetter`], the error and its sources joined by `": "`
//! as the reason (the dead letter's `x-death-reason`). Put it outside the
//! retry and deferral layers, to end what they pass on (fatal failures,
//! deferrals past their limit).
//!
//! An error the [classifier](crate::classify) calls a wait
//! ([`FailureClass::RetryAfter`](crate::classify::FailureClass::RetryAfter),
//! e.g. a load shed's `Overloaded`) becomes a deferral instead, even without
//! a [`DeferOn429`](struct@crate::defer::DeferOn429).
//!
//! A worker dead-letters errors without it too; the layer makes the decision
//! visible to the layers outside it (metrics, tracing).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use queuey_core::{BoxError, JobContext, JobError, Uuid};
//! use queuey_tower::dead_letter::DeadLetterLayer;
//! use queuey_core::Disposition;
//! use queuey_tower::JobRequest;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! let stack = ServiceBuilder::new()
//!     .layer(DeadLetterLayer::new())
//!     .service(service_fn(|_: JobRequest<()>| async {
//!         Err::<Disposition, BoxError>(JobError::fatal("invalid address").into_box_error())
//!     }));
//! let request = JobRequest::new((), JobContext::new(Uuid::new_v4(), "q"));
//! assert_eq!(
//!     stack.oneshot(request).await.unwrap(),
//!     Disposition::DeadLetter { reason: "fatal: invalid address".into() }
//! );
//! # }
//! ```

pub mod future;

use queuey_core::{BoxError, Disposition};
use tower_service::Service;

use crate::JobRequest;

crate::plain_layer! {
    /// Turns every error into a dead letter; see the [module documentation](self).
    pub struct DeadLetterLayer;

    /// The service [`DeadLetterLayer`] produces.
    pub struct DeadLetter<S> {}
}

impl<S, J> Service<JobRequest<J>> for DeadLetter<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
{
    crate::disposition_service!(future::ResponseFuture<S::Future>);

    fn call(&mut self, request: JobRequest<J>) -> Self::Future {
        future::ResponseFuture {
            classifier: request.classifier().clone(),
            inner: self.inner.call(request),
        }
    }
}
