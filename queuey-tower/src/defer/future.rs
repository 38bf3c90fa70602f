//! The response future of [`Defer`](super::Defer).

use std::task::{Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::Disposition;

use crate::classifier::{Classify, DeferralLimitReached, FailureClass, SharedClassifier};

pin_project! {
    /// The response future of [`Defer`](super::Defer).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        pub(super) inner: F,
        pub(super) deferrals: u32,
        pub(super) max_deferrals: Option<u32>,
        pub(super) classifier: SharedClassifier,
    }
}

crate::disposition_future!(|this, cx| {
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
});
