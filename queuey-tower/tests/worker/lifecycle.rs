//! Concurrency, shutdown, settle failures and how `run` ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::StreamExt;
use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::{Error, JobContext, JobError, JobHandler, Queues, handler_fn};
use queuey_tower::{Worker, WorkerError};

use crate::support::{Single, Task, TestQueues, bounded, producer, spawn, wait_until};

/// Sleeps, counting how many run at once.
struct Sleepy {
    running: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
    nap: Duration,
}

impl JobHandler for Sleepy {
    type Job = Task;

    async fn handle(&self, _job: Task, _ctx: JobContext) -> Result<(), JobError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.nap).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A worker on a fresh backend whose handler returns at once.
async fn idle_worker() -> (Arc<MemoryBackend>, Worker<TestQueues, Arc<MemoryBackend>>) {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, _, _) = sleepy(Duration::from_millis(1));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .build()
        .await
        .unwrap();
    (backend, worker)
}

fn sleepy(nap: Duration) -> (Sleepy, Arc<AtomicU32>, Arc<AtomicU32>) {
    let running = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let handler = Sleepy {
        running: Arc::clone(&running),
        peak: Arc::clone(&peak),
        nap,
    };
    (handler, running, peak)
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_bound_holds_over_a_thousand_jobs() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, busy, peak) = sleepy(Duration::from_millis(10));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .concurrency(7)
        .build()
        .await
        .unwrap();
    let tasks_before = alive_tasks();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    let jobs: Vec<Task> = (0..1_000).map(|n| Task { n }).collect();
    assert!(
        producer
            .enqueue_batch(&jobs)
            .await
            .iter()
            .all(Result::is_ok)
    );
    wait_until(|| handle.jobs_settled() == 1_000).await;
    assert_eq!(
        peak.load(Ordering::SeqCst),
        7,
        "the bound is reached and never passed"
    );
    assert_eq!(busy.load(Ordering::SeqCst), 0);
    assert!(backend.unacked_count("t.work") <= 7);
    running.stop().await;
    assert_eq!(
        (
            backend.ready_count("t.work"),
            backend.unacked_count("t.work")
        ),
        (0, 0)
    );
    // The tasks the jobs ran on end with the worker.
    wait_until(|| alive_tasks() <= tasks_before).await;
}

/// How many tasks the test's runtime has.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

#[tokio::test(start_paused = true)]
async fn an_idle_queue_does_not_hold_a_slot_another_queue_needs() {
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        // `t.work` stays empty; `t.single` gets the jobs.
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .handler(handler_fn(|_: Single, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    for n in 0..5 {
        producer.enqueue(&Single { n }).await.unwrap();
    }
    wait_until(|| running.handle.jobs_settled() == 5).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_jobs_in_flight_finish_and_leaves_the_rest_on_the_queue() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, _, _) = sleepy(Duration::from_secs(5));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .concurrency(2)
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let producer = producer(backend.clone()).await;
    let jobs: Vec<Task> = (0..10).map(|n| Task { n }).collect();
    assert!(
        producer
            .enqueue_batch(&jobs)
            .await
            .iter()
            .all(Result::is_ok)
    );
    let task = tokio::spawn(worker.run());
    wait_until(|| handle.jobs_started() == 2).await;

    handle.shutdown();
    assert!(handle.is_shutting_down());
    bounded(task).await.unwrap().unwrap();
    assert_eq!(handle.jobs_settled(), 2, "both jobs in flight finished");
    assert_eq!(handle.jobs_started(), 2, "nothing new was taken");
    assert_eq!(handle.in_flight(), 0);
    assert_eq!(
        (
            backend.ready_count("t.work"),
            backend.unacked_count("t.work")
        ),
        (8, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn jobs_still_running_at_the_shutdown_timeout_go_back_to_the_broker() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, _, _) = sleepy(Duration::from_secs(3600));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .shutdown_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let tasks_before = alive_tasks();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| handle.jobs_started() == 1).await;
    let started = tokio::time::Instant::now();
    running.stop().await;
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(handle.jobs_settled(), 0);
    // The abandoned job's task ended with it.
    wait_until(|| alive_tasks() <= tasks_before).await;

    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let again = stream.next().await.unwrap().unwrap();
    assert!(again.redelivered(), "the abandoned job is delivered again");
}

#[tokio::test(start_paused = true)]
async fn a_settle_failure_leaves_the_delivery_unacked_and_it_is_redelivered() {
    let backend = crate::faulty::FaultyBackend::default();
    backend.fail_retries.store(1, Ordering::SeqCst);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: Task, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((ctx.attempt(), ctx.redelivered()));
                if ctx.redelivered() {
                    Ok(())
                } else {
                    Err(JobError::retryable("down"))
                }
            }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| handle.jobs_settled() == 1).await;

    assert_eq!(handle.settle_failures(), 1, "the refused retry is counted");
    // Nothing was acknowledged: the same attempt came back, redelivered.
    assert_eq!(*seen.lock().unwrap(), vec![(1, false), (1, true)]);
    let memory = &backend.inner;
    assert_eq!(memory.held_count("t.work"), 0);
    assert!(memory.dead_letters("t.work").is_empty());
    assert_eq!(
        (memory.ready_count("t.work"), memory.unacked_count("t.work")),
        (0, 0)
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn run_fails_when_a_consumer_ends_underneath_it() {
    let (backend, worker) = idle_worker().await;
    let task = tokio::spawn(worker.run());
    tokio::task::yield_now().await;
    backend.close();
    let err = bounded(task).await.unwrap().unwrap_err();
    assert!(
        matches!(&err, WorkerError::BackendClosed { queue } if queue == "t.work"),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn run_fails_when_a_queue_cannot_be_consumed() {
    let (backend, worker) = idle_worker().await;
    backend.close();
    let err = bounded(worker.run()).await.unwrap_err();
    assert!(
        matches!(
            &err,
            WorkerError::Consume {
                source: Error::ShutDown,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn run_until_stops_on_the_signal() {
    let (_backend, worker) = idle_worker().await;
    let started = tokio::time::Instant::now();
    bounded(worker.run_until(tokio::time::sleep(Duration::from_secs(30))))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn build_declares_the_set_and_refuses_bad_setups() {
    let (backend, worker) = idle_worker().await;
    for queue in TestQueues::ALL {
        assert!(backend.is_declared(queue.name()));
    }
    assert_eq!(worker.queues().collect::<Vec<_>>(), vec!["t.work"]);

    let err = Worker::<TestQueues, _>::builder(backend.clone())
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no handler"), "{err}");

    let (a, _, _) = sleepy(Duration::from_millis(1));
    let (b, _, _) = sleepy(Duration::from_millis(1));
    let err = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(a)
        .handler(b)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("job type `task` has two handlers"),
        "{err}"
    );

    let (c, _, _) = sleepy(Duration::from_millis(1));
    let err = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(c)
        .concurrency(0)
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("concurrency"), "{err}");
}
