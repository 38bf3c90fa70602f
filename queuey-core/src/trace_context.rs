//! The W3C trace context a job carries from its producer to its handler.
//!
//! With the `opentelemetry` feature, an enqueue records the current
//! [`tracing`] span's context (through `tracing-opentelemetry`) in the
//! envelope's `traceparent` and `tracestate`, and the worker's trace layer
//! makes each attempt's span its child. In the envelope, not broker
//! headers, they work on every backend and survive retries, deferrals and
//! dead letters. Without the feature they are never written (but read).

#[cfg(feature = "opentelemetry")]
pub use otel::{inject_current, parent_context};

#[cfg(feature = "opentelemetry")]
mod otel {
    use std::collections::HashMap;

    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use crate::Envelope;

    const TRACEPARENT: &str = "traceparent";
    const TRACESTATE: &str = "tracestate";

    /// Records the current span's trace context in `envelope`, if the
    /// current span belongs to a sampled or remote OpenTelemetry trace.
    pub fn inject_current(envelope: &mut Envelope) {
        let context = tracing::Span::current().context();
        if !context.span().span_context().is_valid() {
            return;
        }
        let mut carrier = HashMap::with_capacity(2);
        TraceContextPropagator::new().inject_context(&context, &mut carrier);
        envelope.traceparent = carrier.remove(TRACEPARENT);
        envelope.tracestate = carrier.remove(TRACESTATE).filter(|s| !s.is_empty());
    }

    /// The OpenTelemetry context a job's span should be a child of. An
    /// invalid `traceparent` gives an empty context (the span is a root).
    pub fn parent_context(traceparent: &str, tracestate: Option<&str>) -> opentelemetry::Context {
        let mut carrier = HashMap::with_capacity(2);
        carrier.insert(TRACEPARENT.to_owned(), traceparent.to_owned());
        if let Some(state) = tracestate {
            carrier.insert(TRACESTATE.to_owned(), state.to_owned());
        }
        TraceContextPropagator::new().extract(&carrier)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use opentelemetry::trace::TraceContextExt;

        #[test]
        fn a_valid_traceparent_becomes_a_remote_parent() {
            let cx = parent_context(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("vendor=value"),
            );
            let span = cx.span();
            let sc = span.span_context();
            assert!(sc.is_valid() && sc.is_remote());
            assert_eq!(
                sc.trace_id().to_string(),
                "4bf92f3577b34da6a3ce929d0e0e4736"
            );
            assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
            assert_eq!(sc.trace_state().header(), "vendor=value");
        }

        #[test]
        fn garbage_is_no_parent_and_no_panic() {
            for bad in [
                "",
                "00-zz-zz-01",
                "not a traceparent",
                "00-00000000000000000000000000000000-0000000000000000-01",
            ] {
                let cx = parent_context(bad, Some("\u{0}"));
                assert!(!cx.span().span_context().is_valid(), "{bad}");
            }
        }

        #[test]
        fn without_an_otel_span_nothing_is_injected() {
            let mut envelope =
                crate::Envelope::new("t", "q", serde_json::value::to_raw_value(&1).unwrap());
            inject_current(&mut envelope);
            assert_eq!(envelope.traceparent, None);
            assert_eq!(envelope.tracestate, None);
        }
    }
}
