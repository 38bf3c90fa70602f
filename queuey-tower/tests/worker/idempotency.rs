//! Jobs handled once through a worker: copies of a job id are acknowledged
//! without running the handler again, composed with the default stack's
//! retries and deferrals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::store::MemoryStore;
use queuey_core::{EnqueueOptions, JobContext, JobError, JobHandler, Queues, Uuid};
use queuey_tower::Worker;
use queuey_tower::idempotency::IdempotencyLayer;

use crate::support::{Task, TestQueues, producer, spawn, wait_until};

/// Counts its calls and its successful runs; fails the first attempt of
/// every job if asked; takes `takes`.
struct Counting {
    calls: Arc<AtomicU32>,
    successes: Arc<AtomicU32>,
    fail_first: bool,
    takes: Duration,
}

impl Counting {
    fn new(fail_first: bool, takes: Duration) -> (Counting, Arc<AtomicU32>, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let successes = Arc::new(AtomicU32::new(0));
        let handler = Counting {
            calls: Arc::clone(&calls),
            successes: Arc::clone(&successes),
            fail_first,
            takes,
        };
        (handler, calls, successes)
    }
}

impl JobHandler for Counting {
    type Job = Task;

    async fn handle(&self, _: Task, ctx: JobContext) -> Result<(), JobError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.takes).await;
        if self.fail_first && ctx.attempt() == 1 {
            return Err(JobError::retryable("the mail server is busy"));
        }
        self.successes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Enqueues `copies` jobs with the id `id`.
async fn enqueue_copies(backend: &Arc<MemoryBackend>, id: Uuid, copies: u32) {
    let producer = producer(Arc::clone(backend)).await;
    for n in 0..copies {
        producer
            .enqueue_with(&Task { n }, EnqueueOptions::default().job_id(id))
            .await
            .unwrap();
    }
}

fn queue_is_empty(backend: &MemoryBackend) -> bool {
    let queue = TestQueues::Work.name();
    backend.ready_count(queue) + backend.held_count(queue) + backend.unacked_count(queue) == 0
}

#[tokio::test(start_paused = true)]
async fn copies_of_a_handled_job_are_acknowledged_without_running_it() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, calls, _) = Counting::new(false, Duration::ZERO);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(handler, IdempotencyLayer::new(MemoryStore::new()))
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    enqueue_copies(&backend, Uuid::new_v4(), 3).await;
    enqueue_copies(&backend, Uuid::new_v4(), 1).await;
    wait_until(|| running.handle.jobs_finished() >= 4).await;
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one run per job id");
    assert!(queue_is_empty(&backend));
    assert!(backend.dead_letters(TestQueues::Work.name()).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_copy_taken_while_the_job_runs_waits_and_is_then_acknowledged() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, calls, _) = Counting::new(false, Duration::from_secs(5));
    let store = MemoryStore::new();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(handler, IdempotencyLayer::new(store.clone()))
        .concurrency(2)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    enqueue_copies(&backend, Uuid::new_v4(), 2).await;
    wait_until(|| running.handle.jobs_finished() >= 2).await;
    // The copy was deferred (settled, then back) while the first ran.
    assert!(running.handle.jobs_settled() >= 3);
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(queue_is_empty(&backend));
    // Only the record is left.
    assert_eq!(store.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_retried_and_the_job_then_handled_once() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, calls, successes) = Counting::new(true, Duration::ZERO);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(handler, IdempotencyLayer::new(MemoryStore::new()))
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    // Two copies: both fail their first attempt (nothing recorded), come
    // back after the queue's 1 s backoff; the first to run again succeeds,
    // the other is acknowledged without running.
    enqueue_copies(&backend, Uuid::new_v4(), 2).await;
    wait_until(|| running.handle.jobs_finished() >= 2).await;
    running.stop().await;
    assert_eq!(successes.load(Ordering::SeqCst), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(queue_is_empty(&backend));
}

#[tokio::test(start_paused = true)]
async fn around_the_whole_stack_it_records_final_acknowledgements() {
    let backend = Arc::new(MemoryBackend::new());
    let (handler, calls, successes) = Counting::new(true, Duration::ZERO);
    let store = MemoryStore::new();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .layer(IdempotencyLayer::new(store.clone()))
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let id = Uuid::new_v4();
    enqueue_copies(&backend, id, 1).await;
    wait_until(|| running.handle.jobs_finished() >= 1).await;
    // A retry released the claim; the success recorded the job.
    assert_eq!(
        (
            calls.load(Ordering::SeqCst),
            successes.load(Ordering::SeqCst)
        ),
        (2, 1)
    );
    enqueue_copies(&backend, id, 1).await;
    wait_until(|| running.handle.jobs_finished() >= 2).await;
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the copy did not run");
    assert_eq!(store.len(), 1);
}

/// Answers a `Retry-After` on the first call and a fatal error on the
/// second, counting calls.
struct DeferThenFail {
    calls: Arc<AtomicU32>,
}

impl JobHandler for DeferThenFail {
    type Job = Task;

    async fn handle(&self, _: Task, _: JobContext) -> Result<(), JobError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(JobError::deferred(Duration::from_secs(2)));
        }
        Err(JobError::fatal("the order was cancelled"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_deferred_then_dead_lettered_job_runs_each_time_and_leaves_no_key() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let store = MemoryStore::new();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(
            DeferThenFail {
                calls: Arc::clone(&calls),
            },
            IdempotencyLayer::new(store.clone()),
        )
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    enqueue_copies(&backend, Uuid::new_v4(), 1).await;
    wait_until(|| running.handle.jobs_finished() >= 1).await;
    running.stop().await;
    // The deferral released the claim, so the job ran again when it came
    // back; the dead letter recorded nothing (a replay would run it).
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(backend.dead_letters(TestQueues::Work.name()).len(), 1);
    assert!(store.is_empty());
}
