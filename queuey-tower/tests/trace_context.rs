//! Trace context from producer to handler: a span started where a job is
//! enqueued is the parent of the span the worker runs the job in, across
//! the envelope, with the messaging attributes on the job's span.

#[path = "support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};

use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use queuey_core::memory::MemoryBackend;
use queuey_core::{JobContext, JobError};
use queuey_tower::Worker;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

use support::{Task, TestQueues, producer, spawn, wait_until};

#[tokio::test(start_paused = true)]
async fn the_producers_span_is_the_parent_of_the_handlers_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("queuey-test")));
    let _default = tracing::subscriber::set_default(subscriber);

    let backend = Arc::new(MemoryBackend::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(queuey_core::handler_fn(
            move |job: Task, ctx: JobContext| {
                let log = Arc::clone(&log);
                async move {
                    log.lock()
                        .unwrap()
                        .push((job.n, ctx.traceparent().map(str::to_owned)));
                    Ok::<(), JobError>(())
                }
            },
        ))
        // The default stack's TraceLayer opens the job's span.
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend).await;
    producer
        .enqueue(&Task { n: 1 })
        .instrument(tracing::info_span!("http_request"))
        .await
        .unwrap();
    // Enqueued outside any span: the job's span is a root.
    producer.enqueue(&Task { n: 2 }).await.unwrap();
    wait_until(|| running.handle.jobs_settled() >= 2).await;
    running.stop().await;
    drop(_default);
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let request = spans
        .iter()
        .find(|s| s.name == "http_request")
        .expect("the producer's span");
    let jobs: Vec<_> = spans.iter().filter(|s| s.name == "job").collect();
    assert_eq!(jobs.len(), 2, "{spans:#?}");
    let seen = seen.lock().unwrap().clone();
    let child = jobs
        .iter()
        .find(|s| s.span_context.trace_id() == request.span_context.trace_id())
        .expect("one job span in the producer's trace");
    assert_eq!(child.parent_span_id, request.span_context.span_id());
    assert_eq!(child.span_kind, SpanKind::Consumer);
    let attribute = |span: &opentelemetry_sdk::trace::SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(
        attribute(child, "messaging.destination.name").as_deref(),
        Some("t.work")
    );
    assert_eq!(
        attribute(child, "messaging.operation.type").as_deref(),
        Some("process")
    );
    assert!(attribute(child, "messaging.message.id").is_some());
    // The other job carried no context and started a trace of its own.
    let root = jobs
        .iter()
        .find(|s| s.span_context.trace_id() != request.span_context.trace_id())
        .expect("a job span in a trace of its own");
    assert!(!root.parent_span_is_remote);
    let with_context: Vec<_> = seen.iter().filter(|(_, tp)| tp.is_some()).collect();
    assert_eq!(with_context.len(), 1, "{seen:?}");
    assert_eq!(with_context[0].0, 1);
}
