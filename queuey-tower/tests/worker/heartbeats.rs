//! Each worker's heartbeat, as the list of workers shows it.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Heartbeats;
use queuey_core::memory::MemoryBackend;
use queuey_core::{JobContext, JobError, handler_fn};
use queuey_tower::Worker;

use crate::support::{Task, TestQueues, producer, spawn, wait_until};

#[tokio::test(start_paused = true)]
async fn a_worker_shows_its_queues_its_running_jobs_and_its_totals() {
    let backend = Arc::new(MemoryBackend::new());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let handler = {
        let gate = Arc::clone(&gate);
        handler_fn(move |job: Task, _ctx: JobContext| {
            let gate = Arc::clone(&gate);
            async move {
                if job.n == 0 {
                    gate.acquire().await.unwrap().forget();
                    return Ok(());
                }
                Err(JobError::fatal("no"))
            }
        })
    };
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .concurrency(3)
        .heartbeat_interval(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    let slow = producer.enqueue(&Task { n: 0 }).await.unwrap();
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| handle.jobs_finished() == 1 && handle.jobs_running() == 1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    let workers = backend.workers().await.unwrap();
    assert_eq!(workers.len(), 1);
    let beat = &workers[0];
    assert_eq!(beat.queues, ["t.work"]);
    assert_eq!(beat.concurrency, 3);
    assert_eq!(beat.pid, std::process::id());
    assert_eq!(beat.connection, "connected");
    assert_eq!(beat.interval_ms, 2_000);
    assert_eq!(beat.running.len(), 1);
    assert_eq!(beat.running[0].job_id, slow);
    assert_eq!(beat.running[0].job_type, "task");
    assert_eq!(beat.running[0].attempt, 1);
    assert_eq!(beat.totals.len(), 1);
    assert_eq!(beat.totals[0].dead_lettered, 1);
    assert_eq!(beat.totals[0].finished, 0);

    gate.add_permits(1);
    wait_until(|| handle.jobs_finished() == 2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let beat = backend.workers().await.unwrap().remove(0);
    assert!(beat.running.is_empty());
    assert_eq!(beat.totals[0].finished, 1);

    running.stop().await;
    assert!(
        backend.workers().await.unwrap().is_empty(),
        "a worker that stops drops off at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_dies_drops_off_after_three_intervals() {
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .heartbeat_interval(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    wait_until(|| {
        futures::FutureExt::now_or_never(backend.workers())
            .and_then(Result::ok)
            .is_some_and(|w| w.len() == 1)
    })
    .await;
    // Killed: no last heartbeat.
    running.task.abort();
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert_eq!(backend.workers().await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(backend.workers().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_zero_heartbeat_interval_is_refused() {
    let error = Worker::<TestQueues, _>::builder(Arc::new(MemoryBackend::new()))
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .heartbeat_interval(Duration::ZERO)
        .build()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("heartbeat interval"), "{error}");
}
