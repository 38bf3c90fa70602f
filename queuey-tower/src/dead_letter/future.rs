//! The response future of [`DeadLetter`](super::DeadLetter).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use queuey_core::BoxError;

use crate::Disposition;
use crate::classify::error_chain;

pin_project! {
    /// The response future of [`DeadLetter`](super::DeadLetter).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F) -> Self {
        ResponseFuture { inner }
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Disposition, BoxError>>,
{
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(match ready!(self.project().inner.poll(cx)) {
            Ok(disposition) => disposition,
            Err(error) => Disposition::DeadLetter {
                reason: error_chain(&*error),
            },
        }))
    }
}
