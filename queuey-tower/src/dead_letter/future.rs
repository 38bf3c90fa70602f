//! The response future of [`DeadLetter`](super::DeadLetter).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition};

use crate::classifier::{Classify, SharedClassifier, last_resort};

pin_project! {
    /// The response future of [`DeadLetter`](super::DeadLetter).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        classifier: SharedClassifier,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F, classifier: SharedClassifier) -> Self {
        ResponseFuture { inner, classifier }
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Disposition, BoxError>>,
{
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(Ok(match ready!(this.inner.poll(cx)) {
            Ok(disposition) => disposition,
            Err(error) => last_resort(this.classifier.classify(&*error), &*error),
        }))
    }
}
