//! The response future of [`Defer`](super::Defer).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::BoxError;

use super::DeferralLimitReached;
use crate::Disposition;
use crate::LONGEST_WAIT;
use crate::classify::{Classify, FailureClass};

pin_project! {
    /// The response future of [`Defer`](super::Defer).
    #[derive(Debug)]
    pub struct ResponseFuture<F, C> {
        #[pin]
        inner: F,
        deferrals: u32,
        max_deferrals: Option<u32>,
        classifier: C,
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(crate) fn new(inner: F, deferrals: u32, max_deferrals: Option<u32>, classifier: C) -> Self {
        ResponseFuture {
            inner,
            deferrals,
            max_deferrals,
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
        let FailureClass::RetryAfter(delay) = this.classifier.classify(&*error) else {
            return Poll::Ready(Err(error));
        };
        if let Some(max) = *this.max_deferrals
            && *this.deferrals >= max
        {
            return Poll::Ready(Err(Box::new(DeferralLimitReached::new(
                *this.deferrals,
                max,
                error,
            ))));
        }
        // A hold cannot wait much longer; waiting the longest it safely can
        // beats a refusal, which would redeliver the job at once.
        let delay = delay.min(LONGEST_WAIT);
        Poll::Ready(Ok(Disposition::Defer { delay }))
    }
}
