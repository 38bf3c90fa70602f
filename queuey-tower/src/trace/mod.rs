//! One `tracing` span per job, and an event for what happens to it.
//!
//! [`TraceLayer`] runs the inner service in a span named `job` (fields
//! `attempt`, `deferrals`, `correlation_id` and the messaging attributes
//! below) and records the outcome as an event at the level that fits:
//!
//! | outcome | level |
//! |---|---|
//! | `Ack`, `Requeue` | DEBUG |
//! | `Defer` | INFO (a deferral is routine: the job waits, nothing failed) |
//! | `Retry` | DEBUG: [`RetryLayer`](struct@crate::retry::RetryLayer) logs each retry at WARN with its error |
//! | `DeadLetter` | DEBUG: the worker logs each dead letter at WARN with its reason, whichever stack decided it |
//! | an error reaching the layer | ERROR |
//!
//! So every retry and every dead letter is one WARN line that says why. Each
//! event carries the disposition, its delay or reason, and the job's
//! duration. The handler's spans, and the retry layer's events when it runs
//! inside this one, nest in the job's span.
//!
//! # Which job a line is about
//!
//! Every line of the job's life (outcomes, retries, deferrals, dead letters,
//! passed deadlines, cancellations) carries `queue`, `job_type` and `job_id`
//! as fields of the event itself: a filter such as `warn` drops this INFO
//! span, and a formatter may print no span, but event fields always show.
//! The span does not repeat them; it tells a handler's own lines their job
//! through the OpenTelemetry consumer attributes it carries: `otel.kind =
//! "consumer"`, `messaging.operation.type = "process"`,
//! `messaging.destination.name` (the queue), `messaging.message.id` (the
//! job id) and `messaging.message.conversation_id` (the correlation id).
//!
//! # Trace context from producer to handler
//!
//! With the `opentelemetry` feature (of `queuey`, `queuey-core` and
//! `queuey-tower`), an enqueue records the current span's W3C trace context
//! in the envelope ([`trace_context`](queuey_core::trace_context)) and this
//! layer makes the job's span its child, so the enqueueing request and the
//! job, run later elsewhere, are one trace. Install a `tracing-opentelemetry`
//! layer in both processes; without one nothing is recorded or linked.

pub mod future;

use queuey_core::{BoxError, Disposition, Job};
use tower_service::Service;

use crate::JobRequest;

crate::plain_layer! {
    /// Traces every job; see the [module documentation](self).
    pub struct TraceLayer;

    /// The service [`TraceLayer`] produces.
    pub struct Trace<S> {}
}

impl<S, J> Service<JobRequest<J>> for Trace<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
    J: Job,
{
    crate::disposition_service!(future::ResponseFuture<S::Future>);

    fn call(&mut self, mut request: JobRequest<J>) -> Self::Future {
        // The layers inside this one name the job type in their lines too.
        request.set_job_type(J::NAME);
        let outcome = future::outcome(&request);
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
        future::ResponseFuture::new(inner, span, outcome)
    }
}
