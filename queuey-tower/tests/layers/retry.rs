use std::sync::Arc;
use std::time::Duration;

use queuey_core::Disposition;
use queuey_core::{Backoff, BoxError, JobError, RetryPolicy};
use queuey_tower::JobRequest;
use queuey_tower::classify::ClassifyLayer;
use queuey_tower::classify::FailureClass;
use queuey_tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt, service_fn};

use crate::support::request;

fn failing(
    error: fn() -> JobError,
) -> impl tower::Service<JobRequest<()>, Response = Disposition, Error = BoxError, Future = impl Send>
+ Clone {
    service_fn(move |_: JobRequest<()>| async move {
        Err::<Disposition, BoxError>(error().into_box_error())
    })
}

fn policy(attempts: u32, secs: u64) -> RetryPolicy {
    RetryPolicy::new(attempts, Backoff::fixed(Duration::from_secs(secs)).unwrap()).unwrap()
}

#[tokio::test]
async fn success_passes_through() {
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy(3, 1)))
        .service(service_fn(|_: JobRequest<()>| async {
            Ok::<_, BoxError>(Disposition::Ack)
        }));
    assert_eq!(svc.oneshot(request(())).await.unwrap(), Disposition::Ack);
}

#[tokio::test]
async fn transient_failure_with_attempts_left_is_a_retry_after_the_backoff() {
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy(3, 7)))
        .service(failing(|| JobError::retryable("reset")));
    for attempt in [1, 2] {
        let mut req = request(());
        *req.ctx_mut() = req.ctx().clone().with_attempt(attempt);
        let d = svc.clone().oneshot(req).await.unwrap();
        assert_eq!(
            d,
            Disposition::Retry {
                delay: Duration::from_secs(7)
            }
        );
    }
}

#[tokio::test]
async fn exponential_backoff_grows_with_the_attempt() {
    let backoff = Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(60))
        .unwrap()
        .without_jitter();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryPolicy::new(10, backoff).unwrap()))
        .service(failing(|| JobError::retryable("x")));
    let mut delays = Vec::new();
    for attempt in 1..=8 {
        let mut req = request(());
        *req.ctx_mut() = req.ctx().clone().with_attempt(attempt);
        match svc.clone().oneshot(req).await.unwrap() {
            Disposition::Retry { delay } => delays.push(delay.as_secs()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 60, 60]);
}

#[tokio::test]
async fn exhausted_attempts_become_a_dead_letter_naming_them() {
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy(3, 1)))
        .service(failing(|| {
            JobError::retryable(std::io::Error::other("connection reset"))
        }));
    let mut req = request(());
    *req.ctx_mut() = req.ctx().clone().with_attempt(3);
    assert_eq!(
        svc.oneshot(req).await.unwrap(),
        Disposition::DeadLetter {
            reason: "attempts exhausted (3 of 3): connection reset".into()
        }
    );
}

#[tokio::test]
async fn fatal_and_deferred_errors_pass_through() {
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy(3, 1)))
        .service(failing(|| JobError::fatal("bad input")));
    let err = svc.oneshot(request(())).await.unwrap_err();
    assert_eq!(err.to_string(), "fatal: bad input");

    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy(3, 1)))
        .service(failing(|| JobError::deferred(Duration::from_secs(9))));
    assert!(svc.oneshot(request(())).await.is_err());
}

#[tokio::test]
async fn the_requests_policy_wins_and_the_context_learns_max_attempts() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy(9, 1)))
        .service(service_fn(move |req: JobRequest<()>| {
            log.lock().unwrap().push(req.ctx().max_attempts());
            async { Err::<Disposition, BoxError>(JobError::retryable("x").into_box_error()) }
        }));
    // The layer's own policy: 9 attempts.
    svc.clone().oneshot(request(())).await.unwrap();
    // The job's (or queue's) policy: 2 attempts, 30 s.
    let mut req = request(()).with_retry_policy(Arc::new(policy(2, 30)));
    *req.ctx_mut() = req.ctx().clone().with_attempt(1);
    assert_eq!(
        svc.clone().oneshot(req).await.unwrap(),
        Disposition::Retry {
            delay: Duration::from_secs(30)
        }
    );
    let mut req = request(()).with_retry_policy(Arc::new(policy(2, 30)));
    *req.ctx_mut() = req.ctx().clone().with_attempt(2);
    assert!(matches!(
        svc.oneshot(req).await.unwrap(),
        Disposition::DeadLetter { .. }
    ));
    assert_eq!(*seen.lock().unwrap(), vec![9, 2, 2]);
}

#[tokio::test]
async fn a_custom_classifier_can_make_errors_fatal() {
    let classifier = |e: &(dyn std::error::Error + 'static)| {
        e.to_string().contains("404").then_some(FailureClass::Fatal)
    };
    let svc = ServiceBuilder::new()
        .layer(ClassifyLayer::new(classifier))
        .layer(RetryLayer::new(policy(3, 1)))
        .service(service_fn(|_: JobRequest<()>| async {
            Err::<Disposition, BoxError>("HTTP 404".into())
        }));
    assert!(
        svc.oneshot(request(())).await.is_err(),
        "404 is not retried"
    );
}

#[tokio::test]
async fn a_backoff_longer_than_a_hold_is_dead_lettered_never_shortened() {
    // `Backoff::fixed` refuses this; the public variant does not.
    let month = RetryPolicy::new(3, Backoff::Fixed(Duration::from_secs(30 * 24 * 3600))).unwrap();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(month))
        .service(failing(|| JobError::retryable("x")));
    let Disposition::DeadLetter { reason } = svc.oneshot(request(())).await.unwrap() else {
        panic!("a month-long backoff must not be parked in a hold");
    };
    assert!(
        reason.starts_with("a retry of 2592000 s is longer"),
        "{reason}"
    );
}
