//! The response future of [`Metrics`](super::Metrics).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use pin_project_lite::pin_project;
use queuey_core::BoxError;

use super::{JOB_DURATION_SECONDS, JOBS_IN_FLIGHT, JOBS_TOTAL};
use crate::Disposition;

#[derive(Debug, Clone)]
pub(crate) struct Labels {
    /// The queue's name on the broker (namespace included).
    pub(crate) queue: Arc<str>,
    pub(crate) job_type: &'static str,
}

/// Keeps the in-flight gauge right even when the future is dropped early
/// (a timeout outside the layer, a shutdown).
#[derive(Debug)]
struct InFlight(Labels);

impl InFlight {
    fn start(labels: Labels) -> Self {
        metrics::gauge!(JOBS_IN_FLIGHT, "queue" => Arc::clone(&labels.queue), "job_type" => labels.job_type)
            .increment(1.0);
        InFlight(labels)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Labels { queue, job_type } = &self.0;
        metrics::gauge!(JOBS_IN_FLIGHT, "queue" => Arc::clone(queue), "job_type" => *job_type)
            .decrement(1.0);
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
    pub(crate) fn new(inner: F, labels: Labels) -> Self {
        ResponseFuture {
            inner,
            in_flight: InFlight::start(labels),
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
        let Labels { queue, job_type } = &this.in_flight.0;
        let disposition = match &result {
            Ok(d) => d.as_str(),
            Err(_) => "error",
        };
        metrics::counter!(JOBS_TOTAL, "queue" => Arc::clone(queue), "job_type" => *job_type, "disposition" => disposition)
            .increment(1);
        metrics::histogram!(JOB_DURATION_SECONDS, "queue" => Arc::clone(queue), "job_type" => *job_type)
            .record(this.started.elapsed().as_secs_f64());
        Poll::Ready(result)
    }
}
