//! One `tracing` span per job, and an event for what happens to it.
//!
//! [`TraceLayer`] opens a span named `job` with the fields `attempt`,
//! `deferrals` and `correlation_id` (and the messaging attributes below),
//! runs the inner service inside it, and records the outcome as an event
//! whose level fits it:
//!
//! | outcome | level |
//! |---|---|
//! | `Ack`, `Requeue` | DEBUG |
//! | `Defer` | INFO (a deferral is routine: the job waits, nothing failed) |
//! | `Retry` | DEBUG: [`RetryLayer`](struct@crate::retry::RetryLayer) logs each retry at WARN with its error |
//! | `DeadLetter` | DEBUG: the worker logs each dead letter at WARN with its reason, whichever stack decided it |
//! | an error reaching the layer | ERROR |
//!
//! So every retry and every dead letter is one WARN line, and it says why.
//! Each event carries the job's `queue`, `job_type` and `job_id`, the
//! disposition, its delay or reason, and the time the job took. Spans opened
//! by the handler nest inside the job's span, and so do the retry layer's
//! events when it runs inside this one.
//!
//! # Which job a line is about
//!
//! Every line of the job's life — this layer's outcome events, each retry,
//! deferral, dead letter, passed deadline and cancellation — carries
//! `queue`, `job_type` and `job_id` as fields of the event itself, never
//! only of a span: a filter such as `warn` drops this INFO span, and a
//! formatter may print no span at all, but it always prints the event's
//! own fields. The span does not repeat them, so a line names its job once.
//! It still tells a handler's own log lines which job they belong to:
//! `messaging.destination.name` is the queue and `messaging.message.id` the
//! job id.
//!
//! The span also carries the OpenTelemetry messaging attributes of a
//! consumer: `otel.kind = "consumer"`, `messaging.operation.type =
//! "process"`, `messaging.destination.name` (the queue),
//! `messaging.message.id` (the job id) and
//! `messaging.message.conversation_id` (the correlation id).
//!
//! # Trace context from producer to handler
//!
//! With the `opentelemetry` cargo feature (of `queuey`, `queuey-core` and
//! `queuey-tower`), every enqueue records the W3C trace context of the
//! current span in the job's envelope
//! ([`trace_context`](queuey_core::trace_context)), and this layer makes the
//! job's span a child of it — so a request that enqueues a job and the job
//! itself, run later in another process, are one trace. Install a
//! `tracing-opentelemetry` layer in both processes; without one, nothing is
//! recorded and nothing is linked.

pub mod future;

use std::task::{Context, Poll};

use queuey_core::{BoxError, Job};
use tower_layer::Layer;
use tower_service::Service;

use queuey_core::Disposition;

use crate::JobRequest;
use crate::job_fields::JobFields;

/// Traces every job; see the [module documentation](self).
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer {
    _priv: (),
}

impl TraceLayer {
    /// A new layer.
    pub const fn new() -> Self {
        TraceLayer { _priv: () }
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Trace { inner }
    }
}

/// The service [`TraceLayer`] produces.
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
}

impl<S> Trace<S> {
    crate::inner_accessors!();
}

impl<S, J> Service<JobRequest<J>> for Trace<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
    J: Job,
{
    type Response = Disposition;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: JobRequest<J>) -> Self::Future {
        // The layers inside this one name the job type in their lines too.
        request.set_job_type(J::NAME);
        let job = JobFields::of(&request);
        let ctx = request.ctx();
        let span = tracing::info_span!(
            "job",
            attempt = ctx.attempt(),
            deferrals = ctx.deferrals(),
            correlation_id = ctx.correlation_id(),
            otel.kind = "consumer",
            messaging.operation.type = "process",
            messaging.destination.name = ctx.queue(),
            messaging.message.id = %ctx.job_id(),
            messaging.message.conversation_id = ctx.correlation_id(),
        );
        #[cfg(feature = "opentelemetry")]
        if let Some(traceparent) = ctx.traceparent() {
            use tracing_opentelemetry::OpenTelemetrySpanExt;
            let parent = queuey_core::trace_context::parent_context(traceparent, ctx.tracestate());
            // Fails only when no OpenTelemetry layer is installed: nothing to link.
            let _ = span.set_parent(parent);
        }
        let inner = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        future::ResponseFuture::new(inner, span, job)
    }
}
