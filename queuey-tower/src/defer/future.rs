//! The response future of [`Defer`](super::Defer).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition};

use crate::classifier::{Classify, DeferralLimitReached, FailureClass, SharedClassifier};

pin_project! {
    /// The response future of [`Defer`](super::Defer).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        deferrals: u32,
        max_deferrals: Option<u32>,
        classifier: SharedClassifier,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(
        inner: F,
        deferrals: u32,
        max_deferrals: Option<u32>,
        classifier: SharedClassifier,
    ) -> Self {
        ResponseFuture {
            inner,
            deferrals,
            max_deferrals,
            classifier,
        }
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Disposition, BoxError>>,
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
        Poll::Ready(Ok(Disposition::Defer { delay }.never_early()))
    }
}
