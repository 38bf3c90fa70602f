//! A cool-down shared across jobs: after one job of a key is told to wait,
//! the other jobs of that key wait too, without calling the handler, and
//! jobs of other keys run on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::{JobContext, JobError, JobHandler};

use queuey_core::memory::MemoryBackend;
use queuey_tower::cooldown::CooldownLayer;
use queuey_tower::defer::DeferOn429;
use queuey_tower::{JobRequest, Worker};
use tokio::time::Instant;
use tower::ServiceBuilder;

use crate::support::{Task, TestQueues, producer, spawn, wait_until};

/// Jobs 0..50 call a rate-limited API ("slow"), jobs 50..100 another one.
fn key(request: &JobRequest<Task>) -> Option<&'static str> {
    Some(if request.job().n < 50 { "slow" } else { "fast" })
}

/// Answers the first call of a "slow" job with `Retry-After: 30`, records
/// every call and when it happened.
struct RateLimited {
    told: AtomicBool,
    calls: Arc<Mutex<Vec<(u32, u32, Instant)>>>,
}

impl JobHandler for RateLimited {
    type Job = Task;

    async fn handle(&self, job: Task, ctx: JobContext) -> Result<(), JobError> {
        self.calls
            .lock()
            .unwrap()
            .push((job.n, ctx.attempt(), Instant::now()));
        if job.n < 50 && !self.told.swap(true, Ordering::SeqCst) {
            return Err(JobError::deferred(Duration::from_secs(30)));
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn one_429_makes_every_job_of_its_key_wait_and_no_other() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(RateLimited {
            told: AtomicBool::new(false),
            calls: Arc::clone(&calls),
        })
        .layer(
            ServiceBuilder::new()
                .layer(CooldownLayer::new(key))
                .layer(DeferOn429::new()),
        )
        // One job at a time, so the first 429 is answered before the next
        // "slow" job is taken.
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    let start = Instant::now();
    for n in 0..100 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    wait_until(|| running.handle.jobs_settled() >= 100 + 50).await;
    running.stop().await;

    let calls = calls.lock().unwrap().clone();
    let slow: Vec<_> = calls.iter().filter(|c| c.0 < 50).collect();
    let fast: Vec<_> = calls.iter().filter(|c| c.0 >= 50).collect();
    // The other key never waited and ran once per job.
    assert_eq!(fast.len(), 50);
    // The slow key: one call answered 429, then each of the 50 once more (the
    // first included), none of them before the cool-down ran out.
    assert_eq!(slow.len(), 51, "{slow:?}");
    let told_at = slow[0].2;
    for (n, attempt, at) in &slow[1..] {
        assert!(
            *at >= told_at + Duration::from_secs(30),
            "job {n} ran {:?} after the 429, inside the 30 s cool-down",
            *at - told_at
        );
        assert_eq!(*attempt, 1, "a cool-down spends no attempt");
    }
    // Every slow job was deferred exactly once and none is left over.
    assert_eq!(
        backend
            .dead_letters(queuey_core::Queues::name(&TestQueues::Work))
            .len(),
        0
    );
    assert!(Instant::now() - start < Duration::from_secs(120));
}
