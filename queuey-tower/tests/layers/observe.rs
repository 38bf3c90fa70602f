//! The metrics and trace layers record what happened.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use queuey_core::Disposition;
use queuey_core::{BoxError, JobContext, JobError, Uuid};
use queuey_tower::JobRequest;
use queuey_tower::dead_letter::DeadLetterLayer;
use queuey_tower::defer::DeferOn429;
use queuey_tower::metrics::MetricsLayer;
use queuey_tower::retry::RetryLayer;
use queuey_tower::trace::TraceLayer;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

use crate::support::{Task, request};

fn answering(
    outcome: fn() -> Result<Disposition, JobError>,
) -> impl tower::Service<JobRequest<Task>, Response = Disposition, Error = BoxError, Future = impl Send>
+ Clone {
    service_fn(
        move |_: JobRequest<Task>| async move { outcome().map_err(JobError::into_box_error) },
    )
}

#[test]
fn metrics_count_outcomes_time_jobs_and_track_in_flight() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        futures::executor::block_on(async {
            let stack = ServiceBuilder::new()
                .layer(MetricsLayer::new())
                .layer(DeadLetterLayer::new());
            let ok = stack.clone().service(answering(|| Ok(Disposition::Ack)));
            ok.clone().oneshot(request(Task { n: 1 })).await.unwrap();
            ok.oneshot(request(Task { n: 2 })).await.unwrap();
            let dead = stack.service(answering(|| Err(JobError::fatal("x"))));
            dead.oneshot(request(Task { n: 3 })).await.unwrap();
        });
    });
    let mut counters = Vec::new();
    let mut histogram_samples = 0;
    let mut gauge = None;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        assert!(
            labels.contains(&("queue".into(), "t.work".into())),
            "{labels:?}"
        );
        assert!(
            labels.contains(&("job_type".into(), "task".into())),
            "{labels:?}"
        );
        match (key.name(), value) {
            ("queuey_jobs_total", DebugValue::Counter(n)) => {
                let disposition = labels
                    .iter()
                    .find(|(k, _)| k == "disposition")
                    .unwrap()
                    .1
                    .clone();
                counters.push((disposition, n));
            }
            ("queuey_job_duration_seconds", DebugValue::Histogram(samples)) => {
                histogram_samples += samples.len();
            }
            ("queuey_jobs_in_flight", DebugValue::Gauge(g)) => gauge = Some(g.into_inner()),
            (name, value) => panic!("unexpected metric {name}: {value:?}"),
        }
    }
    counters.sort();
    assert_eq!(counters, vec![("ack".into(), 2), ("dead_letter".into(), 1)]);
    assert_eq!(histogram_samples, 3);
    assert_eq!(gauge, Some(0.0));
}

/// One metrics service fed jobs of two queues in turn (a stack shared by
/// hand) labels each job with its own queue.
#[test]
fn one_metrics_service_labels_each_job_with_its_own_queue() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        futures::executor::block_on(async {
            let mut svc = ServiceBuilder::new()
                .layer(MetricsLayer::new())
                .service(service_fn(|_: JobRequest<Task>| async {
                    Ok::<_, BoxError>(Disposition::Ack)
                }));
            for queue in ["a", "b", "b", "a", "a"] {
                let ctx = JobContext::new(Uuid::new_v4(), queue);
                let req = JobRequest::new(Task { n: 1 }, ctx);
                svc.ready().await.unwrap().call(req).await.unwrap();
            }
        });
    });
    let mut totals = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if let ("queuey_jobs_total", DebugValue::Counter(n)) = (key.name(), value) {
            let queue = key
                .labels()
                .find(|l| l.key() == "queue")
                .map(|l| l.value().to_owned());
            totals.push((queue, n));
        }
    }
    totals.sort();
    assert_eq!(
        totals,
        vec![(Some("a".to_owned()), 3), (Some("b".to_owned()), 2)]
    );
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn traced(outcome: fn() -> Result<Disposition, JobError>) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        futures::executor::block_on(async {
            let svc = ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(DeadLetterLayer::new())
                .layer(RetryLayer)
                .layer(DeferOn429)
                .service(answering(outcome));
            let mut req = request(Task { n: 1 });
            *req.ctx_mut() = req
                .ctx()
                .clone()
                .with_correlation_id("order-9")
                .with_attempt(2);
            svc.oneshot(req).await.unwrap();
        });
    });
    String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn trace_events_have_a_level_fitting_the_outcome_inside_a_job_span() {
    // The span carries the attempt; the event names its job itself, once.
    let out = traced(|| Ok(Disposition::Ack));
    assert!(
        out.contains("DEBUG job{attempt=2 deferrals=0 correlation_id=\"order-9\""),
        "{out}"
    );
    assert!(
        out.contains("job done queue=t.work job_type=task job_id="),
        "{out}"
    );
    assert_eq!(out.matches("job_id=").count(), 1, "{out}");

    let out = traced(|| Err(JobError::deferred(Duration::from_secs(30))));
    assert!(out.contains(" INFO job{"), "{out}");
    assert!(
        out.contains("job deferred") && out.contains("delay_ms=30000"),
        "{out}"
    );

    // One WARN line per retry, from the retry layer, inside the job's span,
    // carrying the error.
    let out = traced(|| Err(JobError::retryable("flaky")));
    let warnings: Vec<&str> = out.lines().filter(|l| l.contains(" WARN ")).collect();
    assert_eq!(warnings.len(), 1, "{out}");
    assert!(
        warnings[0].contains(" WARN job{")
            && warnings[0].contains("will retry")
            && warnings[0].contains("queue=t.work job_type=task job_id=")
            && warnings[0].contains("error=flaky"),
        "{out}"
    );

    // The worker logs dead letters (once, at WARN); the trace layer only
    // closes the span.
    let out = traced(|| Err(JobError::fatal("broken")));
    assert!(!out.contains(" WARN ") && !out.contains("ERROR"), "{out}");
    assert!(out.contains("reason=fatal: broken"), "{out}");
}
