//! The response future of [`Trace`](super::Trace).

use std::task::{Poll, ready};
use std::time::Instant;

use pin_project_lite::pin_project;
use queuey_core::Disposition;
use queuey_core::escape::Untrusted;
use tracing::Span;

use crate::JobRequest;
use crate::classifier::error_chain;
use crate::job_fields::JobFields;

pin_project! {
    /// The response future of [`Trace`](super::Trace).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        // The job and when it started, for the outcome event: taken only
        // if some event could be recorded.
        outcome: Option<(JobFields, Instant)>,
    }
}

/// What the outcome event of `request`'s job needs: every outcome event is
/// at ERROR or below, so with nothing listening even at ERROR no clock is
/// read and no field kept.
pub(super) fn outcome<J>(request: &JobRequest<J>) -> Option<(JobFields, Instant)> {
    JobFields::if_recorded(request, tracing::Level::ERROR).map(|job| (job, Instant::now()))
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, span: Span, outcome: Option<(JobFields, Instant)>) -> Self {
        ResponseFuture {
            inner,
            span,
            outcome,
        }
    }
}

crate::disposition_future!(|this, cx| {
    let _entered = this.span.enter();
    let result = ready!(this.inner.poll(cx));
    let Some((job, started)) = this.outcome.take() else {
        return Poll::Ready(result);
    };
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (queue, job_type, job_id) = (&*job.queue, job.job_type(), job.job_id);
    // Every outcome's event names its job and how long it took.
    macro_rules! outcome {
        ($level:ident, $($fields:tt)+) => {
            tracing::$level!(%queue, job_type, %job_id, elapsed_ms, $($fields)+)
        };
    }
    match &result {
        Ok(Disposition::Ack) => outcome!(debug, "job done"),
        Ok(Disposition::Defer { delay }) => {
            outcome!(info, delay_ms = delay.as_millis() as u64, "job deferred")
        }
        // The retry layer logs each retry at WARN with its error, and
        // the worker each dead letter at WARN with its reason: here they
        // only close the span.
        Ok(Disposition::Retry { delay }) => {
            outcome!(
                debug,
                delay_ms = delay.as_millis() as u64,
                "job to be retried"
            )
        }
        Ok(Disposition::DeadLetter { reason }) => {
            outcome!(debug, reason = %Untrusted(reason), "job to be dead-lettered")
        }
        Ok(other) => outcome!(debug, disposition = %other, "job answered"),
        Err(error) => outcome!(error, error = %Untrusted(&error_chain(&**error)), "job failed"),
    }
    Poll::Ready(result)
});
