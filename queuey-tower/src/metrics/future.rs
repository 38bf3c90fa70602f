//! The response future of [`Metrics`](super::Metrics).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition};

use super::keys::Keys;

/// Keeps the in-flight gauge right even when the future is dropped early
/// (a timeout outside the layer, a shutdown).
#[derive(Debug)]
struct InFlight(Arc<Keys>);

impl InFlight {
    fn start(keys: Arc<Keys>) -> Self {
        keys.started();
        InFlight(keys)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.left();
    }
}

pin_project! {
    /// The response future of [`Metrics`](super::Metrics).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        in_flight: InFlight,
        started: Instant,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F, keys: Arc<Keys>) -> Self {
        ResponseFuture {
            inner,
            in_flight: InFlight::start(keys),
            started: Instant::now(),
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
        let result = ready!(this.inner.poll(cx));
        this.in_flight
            .0
            .finished(result.as_ref().ok(), this.started.elapsed().as_secs_f64());
        Poll::Ready(result)
    }
}
