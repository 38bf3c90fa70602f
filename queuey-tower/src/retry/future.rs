//! The response future of [`Retry`](super::Retry).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::{BoxError, RetryPolicy};

use crate::classify::{Classify, FailureClass, error_chain};
use crate::{Disposition, LONGEST_WAIT};

pin_project! {
    /// The response future of [`Retry`](super::Retry).
    #[derive(Debug)]
    pub struct ResponseFuture<F, C> {
        #[pin]
        inner: F,
        attempt: u32,
        policy: Arc<RetryPolicy>,
        classifier: C,
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(crate) fn new(inner: F, attempt: u32, policy: Arc<RetryPolicy>, classifier: C) -> Self {
        ResponseFuture {
            inner,
            attempt,
            policy,
            classifier,
        }
    }
}

impl<F, C> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<Disposition, BoxError>>,
    C: Classify,
{
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let error = match ready!(this.inner.poll(cx)) {
            Ok(disposition) => return Poll::Ready(Ok(disposition)),
            Err(error) => error,
        };
        if this.classifier.classify(&*error) != FailureClass::Transient {
            return Poll::Ready(Err(error));
        }
        let attempt = *this.attempt;
        let policy = &**this.policy;
        Poll::Ready(Ok(if policy.has_attempts_left(attempt) {
            Disposition::Retry {
                // The backoff constructors refuse longer waits; this guards
                // a `Backoff::Fixed` built from its public variant, which a
                // hold would refuse (a refused settle redelivers at once).
                delay: policy.delay_after(attempt).min(LONGEST_WAIT),
            }
        } else {
            Disposition::DeadLetter {
                reason: format!(
                    "attempts exhausted ({attempt} of {}): {}",
                    policy.max_attempts(),
                    error_chain(&*error)
                ),
            }
        }))
    }
}
