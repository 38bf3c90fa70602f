//! Deadlines through the worker's default stack: a job retried past its
//! deadline, or taken after it, is dead-lettered with the reason "deadline
//! passed" instead of being run again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use queuey_core::{EnqueueOptions, JobContext, JobError, JobHandler, Queues};

use queuey_core::memory::MemoryBackend;
use queuey_tower::Worker;

use crate::support::{Task, TestQueues, producer, spawn, wait_until};

/// Fails every call with a transient error (the queue's policy retries
/// after 1 s, up to 3 attempts), counting calls and checking the budget.
struct AlwaysFailing {
    calls: Arc<AtomicU32>,
}

impl JobHandler for AlwaysFailing {
    type Job = Task;

    async fn handle(&self, _: Task, ctx: JobContext) -> Result<(), JobError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let left = ctx.remaining().expect("the job carries a deadline");
        assert!(left <= Duration::from_millis(500), "{left:?}");
        Err(JobError::retryable(std::io::Error::other(
            "the API is down",
        )))
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_due_after_the_deadline_is_dead_lettered_at_once() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(AlwaysFailing {
            calls: Arc::clone(&calls),
        })
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    // Half a second of budget; the retry would come back after 1 s.
    producer
        .enqueue_with(
            &Task { n: 1 },
            EnqueueOptions::default().deadline_in(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    wait_until(|| running.handle.jobs_finished() >= 1).await;
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "run once, never retried");
    let dead = backend.dead_letters(TestQueues::Work.name());
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "deadline passed");
    assert_eq!(backend.held_count(TestQueues::Work.name()), 0);
}
