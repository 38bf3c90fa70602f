//! The test runner on tokio's paused clock.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use queuey_core::memory::MemoryBackend;
use queuey_core::periodic::Schedule;
use queuey_core::{Disposition, Job, JobContext, JobError, Producer, Queues, handler_fn};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{Ended, TestRun, TestRunError, run_until_idle};
use crate::Worker;
use crate::periodic::{Clock, Periodic};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "t")]
enum Q {
    #[queue(retry(max_attempts = 3, backoff = "fixed", delay = "10m"))]
    Work,
}

/// What the handler does with the job: fail `failures` times, then
/// `then`.
#[derive(Job, Serialize, Deserialize)]
#[job(queue = Q::Work, name = "step")]
struct Step {
    failures: u32,
    then: Then,
}

#[derive(Serialize, Deserialize, Clone, Copy)]
enum Then {
    Succeed,
    /// A `Retry-After` of this many seconds, once.
    DeferOnce(u64),
    Fatal,
}

async fn step(job: Step, ctx: JobContext) -> Result<(), JobError> {
    if ctx.attempt() <= job.failures {
        return Err(JobError::retryable("not yet"));
    }
    match job.then {
        Then::Succeed => Ok(()),
        Then::DeferOnce(secs) if ctx.deferrals() == 0 => Err(JobError::deferred_msg(
            Duration::from_secs(secs),
            "429 from upstream",
        )),
        Then::DeferOnce(_) => Ok(()),
        Then::Fatal => Err(JobError::fatal("bad input")),
    }
}

async fn worker(backend: &Arc<MemoryBackend>) -> Worker<Q, Arc<MemoryBackend>> {
    Worker::<Q, _>::builder(Arc::clone(backend))
        .handler(handler_fn(step))
        .build()
        .await
        .unwrap()
}

async fn enqueue(backend: &Arc<MemoryBackend>, job: Step) -> queuey_core::Uuid {
    let producer = Producer::<Q, _>::new(Arc::clone(backend)).await.unwrap();
    producer.enqueue(&job).await.unwrap()
}

fn job(failures: u32, then: Then) -> Step {
    Step { failures, then }
}

const TEN_MINUTES: Duration = Duration::from_secs(600);

#[tokio::test(start_paused = true)]
async fn runs_until_idle_and_reports_each_retry_deferral_and_dead_letter() {
    let backend = Arc::new(MemoryBackend::new());
    let flaky = enqueue(&backend, job(1, Then::Succeed)).await;
    let limited = enqueue(&backend, job(0, Then::DeferOnce(30))).await;
    let broken = enqueue(&backend, job(0, Then::Fatal)).await;
    let exhausted = enqueue(&backend, job(5, Then::Succeed)).await;
    let worker = worker(&backend).await;
    let real = std::time::Instant::now();

    let report = run_until_idle(worker).await.unwrap();

    assert_eq!(report.ended(), Ended::Idle, "{report:?}");
    let retry = Disposition::Retry { delay: TEN_MINUTES };
    assert_eq!(report.of_job(flaky), [retry.clone(), Disposition::Ack]);
    assert_eq!(
        report.of_job(limited),
        [
            Disposition::Defer {
                delay: Duration::from_secs(30)
            },
            Disposition::Ack
        ]
    );
    let [Disposition::DeadLetter { reason }] = &report.of_job(broken)[..] else {
        panic!("{report:?}")
    };
    assert!(reason.contains("bad input"), "{reason}");
    let exhausted = report.of_job(exhausted);
    assert_eq!(exhausted[..2], [retry.clone(), retry]);
    assert!(
        matches!(&exhausted[2..], [Disposition::DeadLetter { .. }]),
        "{report:?}"
    );
    assert_eq!(report.jobs_finished(), 4);
    assert_eq!(
        (
            report.acknowledged().count(),
            report.retried().count(),
            report.deferred().count(),
            report.dead_lettered().count()
        ),
        (2, 3, 1, 2)
    );
    assert_eq!(report.of_type("step").count(), report.settlements().len());
    assert!(report.left().is_empty(), "{report:?}");
    // Twenty minutes of retries, on the paused clock.
    assert!(report.elapsed() >= 2 * TEN_MINUTES, "{report:?}");
    assert!(real.elapsed() < Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn no_retry_comes_back_before_its_delay() {
    let backend = Arc::new(MemoryBackend::new());
    let id = enqueue(&backend, job(2, Then::Succeed)).await;
    let report = run_until_idle(worker(&backend).await).await.unwrap();
    let settled: Vec<_> = report
        .settlements()
        .iter()
        .filter(|s| s.job_id == id)
        .collect();
    assert_eq!(settled.len(), 3, "{report:?}");
    for pair in settled.windows(2) {
        assert!(pair[1].at >= pair[0].at + TEN_MINUTES, "{report:?}");
        assert_eq!(pair[1].attempt, pair[0].attempt + 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_held_past_the_horizon_is_left_held() {
    let backend = Arc::new(MemoryBackend::new());
    let id = enqueue(&backend, job(1, Then::Succeed)).await;
    let started = Instant::now();
    let report = TestRun::new(worker(&backend).await)
        .horizon(Duration::from_secs(60))
        .run()
        .await
        .unwrap();
    // Idle as soon as the retry was held: it comes back after the horizon.
    assert_eq!(report.ended(), Ended::Idle);
    assert_eq!(
        report.of_job(id),
        [Disposition::Retry { delay: TEN_MINUTES }]
    );
    assert!(started.elapsed() < Duration::from_secs(60), "{report:?}");
    let left = report.left();
    assert_eq!((left.ready, left.running, left.held), (0, 0, 1));
    let next = left.next_release.unwrap();
    assert!(
        next > Duration::from_secs(590) && next <= TEN_MINUTES,
        "{next:?}"
    );
    assert_eq!(backend.held_count("t.work"), 1);
}

#[tokio::test(start_paused = true)]
async fn until_finished_stops_at_that_many_jobs() {
    let backend = Arc::new(MemoryBackend::new());
    let quick = enqueue(&backend, job(0, Then::Succeed)).await;
    let slow = enqueue(&backend, job(1, Then::Succeed)).await;
    let report = TestRun::new(worker(&backend).await)
        .until_finished(1)
        .run()
        .await
        .unwrap();
    assert_eq!(report.ended(), Ended::Finished);
    assert_eq!(report.of_job(quick), [Disposition::Ack]);
    assert_eq!(
        report.of_job(slow),
        [Disposition::Retry { delay: TEN_MINUTES }]
    );
    assert_eq!(report.left().held, 1, "{report:?}");
    assert!(report.elapsed() < TEN_MINUTES);
}

#[tokio::test(start_paused = true)]
async fn until_finished_waits_through_holds() {
    let backend = Arc::new(MemoryBackend::new());
    enqueue(&backend, job(0, Then::Succeed)).await;
    let slow = enqueue(&backend, job(1, Then::Succeed)).await;
    let report = TestRun::new(worker(&backend).await)
        .until_finished(2)
        .run()
        .await
        .unwrap();
    assert_eq!(report.ended(), Ended::Finished);
    assert_eq!(
        report.of_job(slow),
        [Disposition::Retry { delay: TEN_MINUTES }, Disposition::Ack]
    );
}

#[tokio::test(start_paused = true)]
async fn fewer_jobs_than_awaited_is_an_error_with_the_report() {
    let backend = Arc::new(MemoryBackend::new());
    enqueue(&backend, job(0, Then::Succeed)).await;
    let error = TestRun::new(worker(&backend).await)
        .until_finished(3)
        .run()
        .await
        .unwrap_err();
    let TestRunError::Unfinished {
        wanted,
        finished,
        ended,
        report,
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!((*wanted, *finished, *ended), (3, 1, Ended::Idle));
    assert_eq!(report.acknowledged().count(), 1);
    assert_eq!(
        error.to_string(),
        "1 of the 3 jobs awaited finished before the run ended (idle); the report lists every \
         settle"
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_with_periodic_jobs_runs_to_the_horizon() {
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<Q, _>::builder(Arc::clone(&backend))
        .handler(handler_fn(step))
        .periodic(
            Periodic::new(
                "sweep",
                Schedule::every(Duration::from_secs(60)).unwrap(),
                || job(0, Then::Succeed),
            )
            .clock(Clock::tokio_from(
                UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            )),
        )
        .build()
        .await
        .unwrap();
    let report = TestRun::new(worker)
        .horizon(Duration::from_secs(5 * 60))
        .run()
        .await
        .unwrap();
    // The ticks of minutes 1 to 5: the one at the horizon itself runs.
    assert_eq!(report.ended(), Ended::Horizon);
    assert_eq!(report.acknowledged().count(), 5, "{report:?}");
    assert_eq!(report.elapsed(), Duration::from_millis(5 * 60_000 + 1));
    assert!(report.left().is_empty(), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_closed_backend_is_the_workers_error() {
    let backend = Arc::new(MemoryBackend::new());
    enqueue(&backend, job(1, Then::Succeed)).await;
    let worker = worker(&backend).await;
    let closing = Arc::clone(&backend);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        closing.close();
    });
    let error = run_until_idle(worker).await.unwrap_err();
    assert!(matches!(error, TestRunError::Worker(_)), "{error:?}");
}

#[tokio::test(start_paused = true)]
async fn a_report_reads_one_settle_a_line() {
    let backend = Arc::new(MemoryBackend::new());
    let id = enqueue(&backend, job(1, Then::Succeed)).await;
    let report = run_until_idle(worker(&backend).await).await.unwrap();
    assert_eq!(
        format!("{report:?}"),
        format!(
            "Report {{ ended: idle, after: 600s, left: nothing\n  \
             +0ns    step {id} attempt 1 on t.work: retry in 600s\n  \
             +600s   step {id} attempt 2 on t.work: ack\n}}"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_from_elsewhere_ends_the_run_with_what_happened() {
    let backend = Arc::new(MemoryBackend::new());
    let id = enqueue(&backend, job(1, Then::Succeed)).await;
    let worker = worker(&backend).await;
    let handle = worker.handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        handle.shutdown();
    });
    let error = run_until_idle(worker).await.unwrap_err();
    let TestRunError::Stopped { report } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        report.of_job(id),
        [Disposition::Retry { delay: TEN_MINUTES }]
    );
}
