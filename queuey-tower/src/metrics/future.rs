//! The response future of [`Metrics`](super::Metrics).

use std::sync::Arc;
use std::task::{Poll, ready};
use std::time::Instant;

use pin_project_lite::pin_project;

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

crate::disposition_future!(|this, cx| {
    let result = ready!(this.inner.poll(cx));
    this.in_flight
        .0
        .finished(result.as_ref().ok(), this.started.elapsed().as_secs_f64());
    Poll::Ready(result)
});
