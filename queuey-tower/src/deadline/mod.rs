//! Deadlines: a job that can no longer run in time is dead-lettered instead.
//!
//! [`DeadlineLayer`] holds a job to its
//! [`EnqueueOptions::deadline`](queuey_core::EnqueueOptions::deadline),
//! dead-lettering it with the reason [`DEADLINE_PASSED`] when it is taken
//! after it, still runs at it (its future is dropped, as by a timeout), or
//! would come back from a retry or deferral after it. Jobs without one pass
//! untouched; a handler sees the time left in
//! [`JobContext::remaining`](queuey_core::JobContext::remaining).
//!
//! Deadlines are wall-clock instants (they cross processes): a clock wrong
//! by some seconds moves them by as much. Place the layer outside the retry
//! and deferral layers, as the default stack does.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::{Duration, SystemTime, UNIX_EPOCH};
//! use queuey_core::{BoxError, JobContext, Uuid};
//! use queuey_tower::deadline::DeadlineLayer;
//! use queuey_core::Disposition;
//! use queuey_tower::JobRequest;
//! use queuey_tower::deadline::DEADLINE_PASSED;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! let stack = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new())
//!     .service(service_fn(|_: JobRequest<()>| async {
//!         // Try again in an hour.
//!         Ok::<_, BoxError>(Disposition::Retry { delay: Duration::from_secs(3_600) })
//!     }));
//!
//! let in_a_minute = (SystemTime::now() + Duration::from_secs(60))
//!     .duration_since(UNIX_EPOCH)
//!     .unwrap()
//!     .as_millis() as u64;
//! let ctx = JobContext::new(Uuid::new_v4(), "q").with_deadline_ms(in_a_minute);
//! let answer = stack.oneshot(JobRequest::new((), ctx)).await.unwrap();
//! assert_eq!(answer, Disposition::DeadLetter { reason: DEADLINE_PASSED.into() });
//! # }
//! ```

pub mod future;

use queuey_core::{BoxError, Disposition};
use tower_service::Service;

use crate::JobRequest;
use crate::job_fields::JobFields;

/// The dead-letter reason of a job whose deadline passed.
pub const DEADLINE_PASSED: &str = "deadline passed";

crate::plain_layer! {
    /// Holds jobs to their deadlines; see the [module documentation](self).
    pub struct DeadlineLayer;

    /// The service [`DeadlineLayer`] produces.
    pub struct Deadline<S> {}
}

impl<S, J> Service<JobRequest<J>> for Deadline<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
{
    crate::disposition_service!(future::ResponseFuture<S::Future>);

    fn call(&mut self, request: JobRequest<J>) -> Self::Future {
        match request.ctx().remaining() {
            None => future::ResponseFuture::passed(self.inner.call(request)),
            Some(left) if left.is_zero() => {
                let job = JobFields::of(&request);
                tracing::warn!(
                    queue = %job.queue,
                    job_type = job.job_type(),
                    job_id = %job.job_id,
                    "the job's deadline passed before it was taken; dead-lettering it"
                );
                future::ResponseFuture::expired()
            }
            Some(left) => {
                let job = JobFields::of(&request);
                future::ResponseFuture::bounded(self.inner.call(request), job, left)
            }
        }
    }
}
