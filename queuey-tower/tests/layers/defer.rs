use std::time::Duration;

use queuey_core::Disposition;
use queuey_core::LONGEST_WAIT;
use queuey_core::backend::hold_delay_ms;
use queuey_core::{BoxError, JobError};
use queuey_tower::JobRequest;
use queuey_tower::classify::ClassifyLayer;
use queuey_tower::classify::DeferralLimitReached;
use queuey_tower::classify::{FailureClass, parse_retry_after};
use queuey_tower::defer::DeferOn429;
use tower::{ServiceBuilder, ServiceExt, service_fn};

use crate::support::request;

fn deferring(
    secs: u64,
) -> impl tower::Service<JobRequest<()>, Response = Disposition, Error = BoxError, Future = impl Send>
+ Clone {
    service_fn(move |_: JobRequest<()>| async move {
        Err::<Disposition, BoxError>(JobError::deferred(Duration::from_secs(secs)).into_box_error())
    })
}

#[tokio::test]
async fn a_deferred_error_becomes_a_deferral_of_that_length() {
    let svc = ServiceBuilder::new()
        .layer(DeferOn429::new())
        .service(deferring(30));
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::Defer {
            delay: Duration::from_secs(30)
        }
    );
}

#[tokio::test]
async fn other_errors_and_successes_pass_through() {
    let svc = ServiceBuilder::new()
        .layer(DeferOn429::new())
        .service(service_fn(|_: JobRequest<()>| async {
            Err::<Disposition, BoxError>(JobError::retryable("x").into_box_error())
        }));
    assert_eq!(svc.oneshot(request(())).await.unwrap_err().to_string(), "x");
    let svc = ServiceBuilder::new()
        .layer(DeferOn429::new())
        .service(service_fn(|_: JobRequest<()>| async {
            Ok::<_, BoxError>(Disposition::Ack)
        }));
    assert_eq!(svc.oneshot(request(())).await.unwrap(), Disposition::Ack);
}

#[tokio::test]
async fn the_deferral_cap_turns_one_more_deferral_into_a_failure() {
    let svc = ServiceBuilder::new()
        .layer(DeferOn429::new().max_deferrals(2))
        .service(deferring(1));
    for deferrals in [0, 1] {
        let mut req = request(());
        *req.ctx_mut() = req.ctx().clone().with_deferrals(deferrals);
        assert!(matches!(
            svc.clone().oneshot(req).await.unwrap(),
            Disposition::Defer { .. }
        ));
    }
    let mut req = request(());
    *req.ctx_mut() = req.ctx().clone().with_deferrals(2);
    let err = svc.oneshot(req).await.unwrap_err();
    let limit = err
        .downcast_ref::<DeferralLimitReached>()
        .expect("a DeferralLimitReached");
    assert_eq!((limit.deferrals(), limit.max()), (2, 2));
    assert_eq!(err.to_string(), "deferred 2 times already, the limit is 2");
}

#[tokio::test]
async fn a_30_day_retry_after_is_dead_lettered_never_released_early() {
    let svc = ServiceBuilder::new()
        .layer(DeferOn429)
        .service(deferring(30 * 24 * 3600));
    let Disposition::DeadLetter { reason } = svc.oneshot(request(())).await.unwrap() else {
        panic!("a month-long wait must not be parked in a hold");
    };
    assert!(
        reason.starts_with("a deferral of 2592000 s is longer than a hold can keep"),
        "{reason}"
    );
    // The longest wait itself is kept, whatever the hold's granularity.
    let svc = ServiceBuilder::new()
        .layer(DeferOn429)
        .service(deferring(LONGEST_WAIT.as_secs()));
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::Defer {
            delay: LONGEST_WAIT
        }
    );
    for granularity_secs in [0, 1, 7, 60, 3_600, 20 * 3_600] {
        let granularity = Duration::from_secs(granularity_secs);
        assert!(
            hold_delay_ms("q", LONGEST_WAIT, granularity).is_ok(),
            "{granularity:?}"
        );
    }
}

#[derive(Debug)]
struct TooManyRequests {
    retry_after: String,
}

impl std::fmt::Display for TooManyRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "429 Too Many Requests")
    }
}

impl std::error::Error for TooManyRequests {}

#[tokio::test]
async fn a_classifier_maps_a_client_error_with_a_retry_after_header() {
    let classifier = |e: &(dyn std::error::Error + 'static)| {
        let e = e.downcast_ref::<TooManyRequests>()?;
        parse_retry_after(&e.retry_after).map(FailureClass::RetryAfter)
    };
    let svc = ServiceBuilder::new()
        .layer(ClassifyLayer::new(classifier))
        .layer(DeferOn429)
        .service(service_fn(|_: JobRequest<()>| async {
            Err::<Disposition, BoxError>(Box::new(TooManyRequests {
                retry_after: "120".into(),
            }))
        }));
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::Defer {
            delay: Duration::from_secs(120)
        }
    );
}
