//! The response future of [`Retry`](super::Retry).

use std::sync::Arc;
use std::task::{Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::escape::Untrusted;
use queuey_core::{Disposition, RetryPolicy};

use crate::classifier::{Classify, FailureClass, SharedClassifier, error_chain};
use crate::failure_slot::FailureSlot;
use crate::job_fields::JobFields;

pin_project! {
    /// The response future of [`Retry`](super::Retry).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        pub(super) inner: F,
        // The job its retry line names, kept only if that line could be
        // recorded.
        pub(super) job: Option<JobFields>,
        pub(super) attempt: u32,
        pub(super) policy: Arc<RetryPolicy>,
        pub(super) classifier: SharedClassifier,
        pub(super) failure: Option<FailureSlot>,
    }
}

crate::disposition_future!(|this, cx| {
    let error = match ready!(this.inner.poll(cx)) {
        Ok(disposition) => return Poll::Ready(Ok(disposition)),
        Err(error) => error,
    };
    if this.classifier.classify(&*error) != FailureClass::Transient {
        return Poll::Ready(Err(error));
    }
    let attempt = *this.attempt;
    let policy = &**this.policy;
    let chain = error_chain(&*error);
    if !policy.has_attempts_left(attempt) {
        return Poll::Ready(Ok(Disposition::DeadLetter {
            reason: format!(
                "attempts exhausted ({attempt} of {}): {chain}",
                policy.max_attempts()
            ),
        }));
    }
    let delay = policy.delay_after(attempt);
    let retry = Disposition::Retry { delay }.never_early();
    if let Disposition::Retry { .. } = retry {
        if let Some(job) = &*this.job {
            tracing::warn!(
                queue = %job.queue,
                job_type = job.job_type(),
                job_id = %job.job_id,
                attempt,
                max_attempts = policy.max_attempts(),
                delay_ms = delay.as_millis() as u64,
                error = %Untrusted(&chain),
                "job failed, will retry"
            );
        }
        // The error goes into the job's history, carried by the next
        // attempt and shown on its dead letter.
        if let Some(slot) = this.failure.take() {
            slot.put(chain);
        }
    }
    Poll::Ready(Ok(retry))
});
