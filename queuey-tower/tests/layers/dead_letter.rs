use queuey_core::Disposition;
use queuey_core::{BoxError, JobError};
use queuey_tower::JobRequest;
use queuey_tower::dead_letter::DeadLetterLayer;
use tower::{ServiceBuilder, ServiceExt, service_fn};

use crate::support::request;

#[tokio::test]
async fn any_error_becomes_a_dead_letter_with_its_chain() {
    let svc = ServiceBuilder::new()
        .layer(DeadLetterLayer::new())
        .service(service_fn(|_: JobRequest<()>| async {
            Err::<Disposition, BoxError>(
                JobError::fatal(std::io::Error::other("disk full")).into_box_error(),
            )
        }));
    assert_eq!(
        svc.oneshot(request(())).await.unwrap(),
        Disposition::DeadLetter {
            reason: "fatal: disk full".into()
        }
    );
}

#[tokio::test]
async fn dispositions_pass_unchanged() {
    for d in [
        Disposition::Ack,
        Disposition::Retry {
            delay: std::time::Duration::from_secs(1),
        },
        Disposition::DeadLetter { reason: "r".into() },
    ] {
        let answer = d.clone();
        let svc = ServiceBuilder::new()
            .layer(DeadLetterLayer::new())
            .service(service_fn(move |_: JobRequest<()>| {
                let answer = answer.clone();
                async move { Ok::<_, BoxError>(answer) }
            }));
        assert_eq!(svc.oneshot(request(())).await.unwrap(), d);
    }
}
