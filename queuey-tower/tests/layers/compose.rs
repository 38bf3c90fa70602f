//! Layers together, in the orders the documentation describes, with tower's
//! own middleware in between.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use queuey_core::Disposition;
use queuey_core::{Backoff, BoxError, JobContext, JobError, JobHandler, RetryPolicy};
use queuey_tower::dead_letter::DeadLetterLayer;
use queuey_tower::defer::DeferOn429;
use queuey_tower::retry::RetryLayer;
use queuey_tower::{HandlerService, JobRequest};
use tower::limit::{ConcurrencyLimitLayer, RateLimitLayer};
use tower::timeout::TimeoutLayer;
use tower::{ServiceBuilder, ServiceExt, service_fn};

use crate::support::{Task, request};

fn policy() -> RetryPolicy {
    RetryPolicy::new(3, Backoff::fixed(Duration::from_secs(2)).unwrap()).unwrap()
}

fn failing_with(
    error: fn() -> JobError,
) -> impl tower::Service<JobRequest<()>, Response = Disposition, Error = BoxError, Future = impl Send>
+ Clone {
    service_fn(move |_: JobRequest<()>| async move {
        Err::<Disposition, BoxError>(error().into_box_error())
    })
}

#[tokio::test]
async fn retry_outside_defer_a_deferral_spends_no_attempt_and_a_failure_retries() {
    let stack = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .layer(RetryLayer::new(policy()))
        .layer(DeferOn429::new());
    let deferred = stack
        .clone()
        .service(failing_with(|| JobError::deferred(Duration::from_secs(5))));
    assert_eq!(
        deferred.oneshot(request(())).await.unwrap(),
        Disposition::Defer {
            delay: Duration::from_secs(5)
        }
    );
    let transient = stack
        .clone()
        .service(failing_with(|| JobError::retryable("x")));
    assert_eq!(
        transient.oneshot(request(())).await.unwrap(),
        Disposition::Retry {
            delay: Duration::from_secs(2)
        }
    );
    let fatal = stack.service(failing_with(|| JobError::fatal("nope")));
    assert_eq!(
        fatal.oneshot(request(())).await.unwrap(),
        Disposition::DeadLetter {
            reason: "fatal: nope".into()
        }
    );
}

#[tokio::test]
async fn defer_outside_retry_still_defers_because_retry_passes_deferrals_on() {
    let svc = ServiceBuilder::new()
        .layer(DeferOn429::new())
        .layer(RetryLayer::new(policy()))
        .service(failing_with(|| JobError::deferred(Duration::from_secs(5))));
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::Defer {
            delay: Duration::from_secs(5)
        }
    );
}

#[tokio::test]
async fn past_the_deferral_cap_the_job_retries_and_then_dies() {
    let stack = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .layer(RetryLayer::new(policy()))
        .layer(DeferOn429::new().max_deferrals(1))
        .service(failing_with(|| JobError::deferred(Duration::from_secs(5))));
    let mut req = request(());
    *req.ctx_mut() = req.ctx().clone().with_deferrals(1);
    assert_eq!(
        stack.clone().oneshot(req).await.unwrap(),
        Disposition::Retry {
            delay: Duration::from_secs(2)
        }
    );
    let mut req = request(());
    *req.ctx_mut() = req.ctx().clone().with_deferrals(1).with_attempt(3);
    match stack.oneshot(req).await.unwrap() {
        Disposition::DeadLetter { reason } => assert_eq!(
            reason,
            "attempts exhausted (3 of 3): deferred 1 times already, the limit is 1: deferred for 5s"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_inside_retry_bounds_each_attempt_and_is_retried() {
    let svc = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .layer(RetryLayer::new(policy()))
        .layer(TimeoutLayer::new(Duration::from_secs(1)))
        .service(service_fn(|_: JobRequest<()>| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, BoxError>(Disposition::Ack)
        }));
    let started = tokio::time::Instant::now();
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::Retry {
            delay: Duration::from_secs(2)
        }
    );
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_outside_retry_is_not_retried() {
    let svc = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .layer(TimeoutLayer::new(Duration::from_secs(1)))
        .layer(RetryLayer::new(policy()))
        .service(service_fn(|_: JobRequest<()>| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, BoxError>(Disposition::Ack)
        }));
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::DeadLetter {
            reason: "request timed out".into()
        }
    );
}

struct Flaky {
    calls: AtomicU32,
}

impl JobHandler for Flaky {
    type Job = Task;

    async fn handle(&self, job: Task, _ctx: JobContext) -> Result<(), JobError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("first call of job {} explodes", job.n);
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_handler_is_a_transient_failure() {
    let handler = Arc::new(Flaky {
        calls: AtomicU32::new(0),
    });
    let svc = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .layer(RetryLayer::new(policy()))
        .service(HandlerService::from_arc(Arc::clone(&handler)));
    assert_eq!(
        svc.clone().oneshot(request(Task { n: 4 })).await.unwrap(),
        Disposition::Retry {
            delay: Duration::from_secs(2)
        }
    );
    assert_eq!(
        svc.oneshot(request(Task { n: 4 })).await.unwrap(),
        Disposition::Ack
    );

    let bare = HandlerService::from_arc(Arc::new(Flaky {
        calls: AtomicU32::new(0),
    }));
    let err = bare.oneshot(request(Task { n: 5 })).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the handler panicked: first call of job 5 explodes"
    );
}

#[tokio::test(start_paused = true)]
async fn tower_limits_compose_anywhere_in_the_stack() {
    let running = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let (r, p) = (Arc::clone(&running), Arc::clone(&peak));
    let svc = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .layer(RetryLayer::new(policy()))
        .layer(ConcurrencyLimitLayer::new(2))
        .layer(RateLimitLayer::new(100, Duration::from_secs(1)))
        .layer(DeferOn429::new())
        .service(service_fn(move |_: JobRequest<()>| {
            let (r, p) = (Arc::clone(&r), Arc::clone(&p));
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, BoxError>(Disposition::Ack)
            }
        }));
    let svc = tower::buffer::Buffer::new(svc, 64);
    let calls = (0..20).map(|_| svc.clone().oneshot(request(())));
    for answer in futures::future::join_all(calls).await {
        assert_eq!(answer.unwrap(), Disposition::Ack);
    }
    assert_eq!(peak.load(Ordering::SeqCst), 2);
}
