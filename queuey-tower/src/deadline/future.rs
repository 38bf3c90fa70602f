//! The response future of [`Deadline`](super::Deadline).

use std::task::{Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use queuey_core::Disposition;
use tokio::time::{Instant, Sleep};

use super::DEADLINE_PASSED;
use crate::job_fields::JobFields;

pin_project! {
    /// The response future of [`Deadline`](super::Deadline).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        /// No deadline: the inner answer, untouched.
        Passed { #[pin] inner: F },
        /// Taken after the deadline: never run.
        Expired,
        /// Running with time left until `deadline`.
        Bounded {
            #[pin]
            inner: F,
            #[pin]
            sleep: Sleep,
            deadline: Instant,
            job: JobFields,
        },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn passed(inner: F) -> Self {
        ResponseFuture {
            kind: Kind::Passed { inner },
        }
    }

    pub(super) fn expired() -> Self {
        ResponseFuture {
            kind: Kind::Expired,
        }
    }

    pub(super) fn bounded(inner: F, job: JobFields, left: Duration) -> Self {
        let deadline = Instant::now() + left;
        ResponseFuture {
            kind: Kind::Bounded {
                inner,
                sleep: tokio::time::sleep_until(deadline),
                deadline,
                job,
            },
        }
    }
}

fn dead_letter() -> Disposition {
    Disposition::DeadLetter {
        reason: DEADLINE_PASSED.to_owned(),
    }
}

crate::disposition_future!(|this, cx| {
    match this.kind.project() {
        KindProj::Passed { inner } => inner.poll(cx),
        KindProj::Expired => Poll::Ready(Ok(dead_letter())),
        KindProj::Bounded {
            inner,
            sleep,
            deadline,
            job,
        } => {
            if let Poll::Ready(answer) = inner.poll(cx) {
                let left = deadline.saturating_duration_since(Instant::now());
                return Poll::Ready(match answer {
                    // The wait would end at the deadline or after it.
                    Ok(Disposition::Retry { delay } | Disposition::Defer { delay })
                        if delay >= left =>
                    {
                        tracing::warn!(
                            queue = %job.queue,
                            job_type = job.job_type(),
                            job_id = %job.job_id,
                            delay_ms = delay.as_millis() as u64,
                            left_ms = left.as_millis() as u64,
                            "the job would come back after its deadline; dead-lettering it now"
                        );
                        Ok(dead_letter())
                    }
                    other => other,
                });
            }
            ready!(sleep.poll(cx));
            tracing::warn!(
                queue = %job.queue,
                job_type = job.job_type(),
                job_id = %job.job_id,
                "the job's deadline passed while it ran; dead-lettering it"
            );
            Poll::Ready(Ok(dead_letter()))
        }
    }
});
