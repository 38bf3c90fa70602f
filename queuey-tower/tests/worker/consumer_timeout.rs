//! The job timeout against the broker's consumer timeout, as the backend
//! reports it: a job timeout that does not fit under it (with the settle
//! margin) is refused before anything is declared, whichever way the
//! handler was given.

use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::{Error, JobContext, JobError, handler_fn};
use queuey_tower::{DEFAULT_JOB_TIMEOUT, Worker};
use tower_layer::Identity;

use crate::support::{Task, TestQueues, WithConsumerTimeout};

const MINUTE: Duration = Duration::from_secs(60);

fn task_handler() -> impl queuey_core::JobHandler<Job = Task> {
    handler_fn(|_: Task, _: JobContext| async { Ok::<(), JobError>(()) })
}

async fn build_with(backend: &WithConsumerTimeout, job_timeout: Duration) -> Result<(), Error> {
    Worker::<TestQueues, _>::builder(backend.clone())
        .handler(task_handler())
        .job_timeout(job_timeout)
        .build()
        .await
        .map(drop)
}

#[tokio::test]
async fn a_job_timeout_that_reaches_the_consumer_timeout_with_its_margin_is_refused() {
    // RabbitMQ's default: 30 minutes, so a margin of one minute.
    let backend = WithConsumerTimeout::new(30 * MINUTE);
    for refused in [
        29 * MINUTE,
        29 * MINUTE + Duration::from_secs(30),
        45 * MINUTE,
    ] {
        let e = build_with(&backend, refused).await.unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("job timeout of {refused:?}")),
            "{text}"
        );
        assert!(text.contains("consumer timeout of 1800s"), "{text}");
        assert!(text.contains("queue `t.work`"), "{text}");
        assert!(text.contains("below 1740s"), "{text}");
    }
    assert!(
        !backend.inner.is_declared("t.work"),
        "a refused worker declares nothing"
    );
    build_with(&backend, 29 * MINUTE - Duration::from_secs(1))
        .await
        .expect("just under the margin builds");
    // The default job timeout fits the broker's default with room to spare.
    assert!(DEFAULT_JOB_TIMEOUT + MINUTE < 30 * MINUTE);
    Worker::<TestQueues, _>::builder(backend.clone())
        .handler(task_handler())
        .build()
        .await
        .expect("the defaults fit");
}

#[tokio::test]
async fn the_check_holds_whichever_way_the_handler_was_given() {
    let backend = WithConsumerTimeout::new(10 * MINUTE);
    let with = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(task_handler(), Identity::new())
        .job_timeout(10 * MINUTE)
        .build()
        .await;
    assert!(matches!(with, Err(Error::InvalidConfig(_))), "{with:?}");
    let without = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_without_default_stack(task_handler(), Identity::new())
        .job_timeout(10 * MINUTE)
        .build()
        .await;
    assert!(
        matches!(without, Err(Error::InvalidConfig(_))),
        "{without:?}"
    );
}

#[tokio::test]
async fn a_backend_without_a_consumer_timeout_takes_any_job_timeout() {
    let backend = std::sync::Arc::new(MemoryBackend::new());
    Worker::<TestQueues, _>::builder(backend)
        .handler(task_handler())
        .job_timeout(24 * 60 * MINUTE)
        .build()
        .await
        .expect("no consumer timeout, nothing to fit under");
}
