//! Job progress through the worker on the memory backend: a handler's
//! reports show beside its running job in the heartbeats, and reach a
//! caller that watches the job, before its outcome.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Heartbeats;
use queuey_core::control::Progress;
use queuey_core::memory::MemoryBackend;
use queuey_core::{Job, JobContext, JobError, handler_fn};
use queuey_tower::Worker;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support::{TestQueues, producer, spawn, wait_until};

/// Copies `files` files, reporting after each, and waits for a permit of
/// the test's gate before each of them.
#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = TestQueues::Work, name = "copy", output = u32)]
struct Copy {
    files: u32,
}

async fn worker(backend: &Arc<MemoryBackend>, gate: &Arc<Semaphore>) -> crate::support::Running {
    let gate = Arc::clone(gate);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .heartbeat_interval(Duration::from_secs(1))
        .handler(handler_fn(move |job: Copy, ctx: JobContext| {
            let gate = Arc::clone(&gate);
            async move {
                for done in 1..=job.files {
                    gate.acquire().await.unwrap().forget();
                    let percent = u8::try_from(done * 100 / job.files).unwrap_or(100);
                    ctx.progress(percent, &format!("{done} of {} files", job.files));
                }
                Ok::<_, JobError>(job.files)
            }
        }))
        .build()
        .await
        .unwrap();
    spawn(worker)
}

#[tokio::test(start_paused = true)]
async fn a_watching_caller_sees_each_report_then_the_output() {
    let backend = Arc::new(MemoryBackend::new());
    let gate = Arc::new(Semaphore::new(0));
    let running = worker(&backend, &gate).await;
    let producer = producer(backend.clone()).await;
    let mut watch = producer
        .enqueue_and_watch(&Copy { files: 4 }, Duration::from_secs(60))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        gate.add_permits(1);
        seen.push(watch.progress().await.unwrap());
    }
    assert_eq!(
        seen,
        [
            Progress::new(25, "1 of 4 files"),
            Progress::new(50, "2 of 4 files"),
            Progress::new(75, "3 of 4 files"),
        ]
    );
    gate.add_permits(1);
    // The last report may come before the outcome, or be passed over by it.
    while let Some(progress) = watch.progress().await {
        assert_eq!(progress, Progress::new(100, "4 of 4 files"));
    }
    assert_eq!(watch.output().await.unwrap(), 4);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_running_jobs_latest_report_shows_in_the_heartbeats() {
    let backend = Arc::new(MemoryBackend::new());
    let gate = Arc::new(Semaphore::new(0));
    let running = worker(&backend, &gate).await;
    let producer = producer(backend.clone()).await;
    let id = producer.enqueue(&Copy { files: 10 }).await.unwrap();
    let progress_of = || async {
        let workers = backend.workers().await.unwrap();
        let job = workers
            .first()?
            .running
            .iter()
            .find(|job| job.job_id == id)?;
        job.progress.clone()
    };
    wait_until(|| running.handle.jobs_running() == 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(progress_of().await, None, "no report yet");

    gate.add_permits(3);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        progress_of().await,
        Some(Progress::new(30, "3 of 10 files")),
        "the latest report, and only it"
    );

    gate.add_permits(7);
    wait_until(|| running.handle.jobs_finished() == 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let workers = backend.workers().await.unwrap();
    assert!(
        workers[0].running.is_empty(),
        "a finished job is not listed"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn waiting_for_the_output_alone_skips_the_reports() {
    let backend = Arc::new(MemoryBackend::new());
    let gate = Arc::new(Semaphore::new(100));
    let running = worker(&backend, &gate).await;
    let producer = producer(backend.clone()).await;
    let files = producer
        .enqueue_and_wait(&Copy { files: 50 }, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(files, 50);
    running.stop().await;
}
