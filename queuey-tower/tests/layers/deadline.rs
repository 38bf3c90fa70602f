//! DeadlineLayer: jobs past their deadline are dead-lettered, never run late.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuey_core::Disposition;
use queuey_core::{BoxError, JobContext, Uuid};
use queuey_tower::JobRequest;
use queuey_tower::deadline::DEADLINE_PASSED;
use queuey_tower::deadline::DeadlineLayer;
use tower::{ServiceBuilder, ServiceExt, service_fn};

fn ms_from_now(offset: i64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (now + offset) as u64
}

fn request(deadline_ms: Option<u64>) -> JobRequest<()> {
    let ctx = JobContext::new(Uuid::new_v4(), "q");
    let ctx = match deadline_ms {
        Some(ms) => ctx.with_deadline_ms(ms),
        None => ctx,
    };
    JobRequest::new((), ctx)
}

fn dead() -> Disposition {
    Disposition::DeadLetter {
        reason: DEADLINE_PASSED.to_owned(),
    }
}

/// A stack whose handler answers `answer` after `takes`, counting calls.
fn stack(
    takes: Duration,
    answer: Disposition,
    calls: Arc<AtomicU32>,
) -> impl tower::Service<JobRequest<()>, Response = Disposition, Error = BoxError> + Clone {
    ServiceBuilder::new()
        .layer(DeadlineLayer::new())
        .service(service_fn(move |_: JobRequest<()>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            async move {
                tokio::time::sleep(takes).await;
                Ok::<_, BoxError>(answer)
            }
        }))
}

#[tokio::test(start_paused = true)]
async fn a_job_taken_after_its_deadline_is_dead_lettered_without_running() {
    let calls = Arc::new(AtomicU32::new(0));
    let s = stack(Duration::ZERO, Disposition::Ack, calls.clone());
    let answer = s.oneshot(request(Some(ms_from_now(-1)))).await.unwrap();
    assert_eq!(answer, dead());
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never ran");
}

#[tokio::test(start_paused = true)]
async fn jobs_without_a_deadline_and_in_time_pass_through() {
    let calls = Arc::new(AtomicU32::new(0));
    let s = stack(Duration::from_secs(1), Disposition::Ack, calls.clone());
    assert_eq!(
        s.clone().oneshot(request(None)).await.unwrap(),
        Disposition::Ack
    );
    let in_time = request(Some(ms_from_now(60_000)));
    assert_eq!(s.oneshot(in_time).await.unwrap(), Disposition::Ack);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_still_running_at_its_deadline_is_given_up() {
    let calls = Arc::new(AtomicU32::new(0));
    let s = stack(Duration::from_secs(3_600), Disposition::Ack, calls);
    let start = tokio::time::Instant::now();
    let answer = s.oneshot(request(Some(ms_from_now(2_000)))).await.unwrap();
    assert_eq!(answer, dead());
    let waited = start.elapsed();
    assert!(waited <= Duration::from_secs(2), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn a_retry_or_deferral_due_after_the_deadline_is_dead_lettered_at_once() {
    for answer in [
        Disposition::Retry {
            delay: Duration::from_secs(120),
        },
        Disposition::Defer {
            delay: Duration::from_secs(120),
        },
    ] {
        let calls = Arc::new(AtomicU32::new(0));
        let s = stack(Duration::ZERO, answer.clone(), calls.clone());
        let late = s
            .clone()
            .oneshot(request(Some(ms_from_now(60_000))))
            .await
            .unwrap();
        assert_eq!(late, dead(), "{answer:?}");
        // Due back before the deadline: the wait stands.
        let in_time = s
            .oneshot(request(Some(ms_from_now(600_000))))
            .await
            .unwrap();
        assert_eq!(in_time, answer);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
