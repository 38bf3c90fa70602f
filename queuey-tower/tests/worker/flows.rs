//! Jobs through the default stack: success, retries, exhaustion, fatal
//! failures, deferrals, panics and timeouts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::{JobContext, JobError, JobHandler};

use queuey_core::memory::MemoryBackend;
use queuey_tower::Worker;
use tokio::time::Instant;

use crate::support::{Running, Single, Task, TestQueues, producer, spawn, wait_until};

/// What the handler saw on each call: (n, attempt, deferrals, redelivered, when).
type Log = Arc<Mutex<Vec<(u32, u32, u32, bool, Instant)>>>;

/// Fails job `n` the first `fail` times it is called, in the given way.
struct Scripted {
    log: Log,
    fail: u32,
    how: fn() -> JobError,
}

impl JobHandler for Scripted {
    type Job = Task;

    async fn handle(&self, job: Task, ctx: JobContext) -> Result<(), JobError> {
        let calls = {
            let mut log = self.log.lock().unwrap();
            log.push((
                job.n,
                ctx.attempt(),
                ctx.deferrals(),
                ctx.redelivered(),
                Instant::now(),
            ));
            log.iter().filter(|e| e.0 == job.n).count() as u32
        };
        if calls <= self.fail {
            Err((self.how)())
        } else {
            Ok(())
        }
    }
}

async fn start(fail: u32, how: fn() -> JobError) -> (Arc<MemoryBackend>, Log, Running) {
    let backend = Arc::new(MemoryBackend::new());
    let log: Log = Arc::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(Scripted {
            log: Arc::clone(&log),
            fail,
            how,
        })
        .build()
        .await
        .unwrap();
    (backend, log, spawn(worker))
}

#[tokio::test(start_paused = true)]
async fn a_flaky_job_is_retried_through_holds_until_it_succeeds() {
    let (backend, log, running) = start(2, || JobError::retryable("flaky")).await;
    let handle = &running.handle;
    let producer = producer(backend.clone()).await;
    let id = producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| handle.jobs_settled() == 3).await;

    let log = log.lock().unwrap().clone();
    let attempts: Vec<u32> = log.iter().map(|e| e.1).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    // The queue's policy: fixed 1 s backoff, never early.
    assert!(log[1].4 - log[0].4 >= Duration::from_secs(1));
    assert!(log[2].4 - log[1].4 >= Duration::from_secs(1));
    assert!(
        log.iter().all(|e| !e.3),
        "retries are new messages, not redeliveries"
    );
    assert!(backend.dead_letters("t.work").is_empty());
    assert_eq!(
        (
            backend.ready_count("t.work"),
            backend.unacked_count("t.work")
        ),
        (0, 0)
    );
    assert_eq!(handle.settle_failures(), 0);
    running.stop().await;
    let _ = id;
}

#[tokio::test(start_paused = true)]
async fn attempts_exhausted_dead_letters_with_the_attempts_made() {
    let (backend, log, running) = start(u32::MAX, || JobError::retryable("still down")).await;
    let producer = producer(backend.clone()).await;
    let id = producer.enqueue(&Task { n: 7 }).await.unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 1).await;

    assert_eq!(
        log.lock().unwrap().len(),
        3,
        "the queue's policy allows three attempts"
    );
    let dead = backend.dead_letters("t.work").remove(0);
    assert_eq!(dead.attempts, 3);
    assert_eq!(dead.original_queue, "t.work");
    assert_eq!(dead.reason, "attempts exhausted (3 of 3): still down");
    let envelope = dead.envelope().unwrap();
    assert_eq!(envelope.job_id, id);
    // The two retried attempts carried their errors on; the third is the
    // reason. The letter says when it died.
    let history: Vec<(u32, &str)> = envelope
        .errors
        .iter()
        .map(|e| (e.attempt, e.error.as_str()))
        .collect();
    assert_eq!(history, [(1, "still down"), (2, "still down")]);
    assert!(envelope.errors.iter().all(|e| e.at_ms > 0));
    assert_eq!(envelope.errors_cut, 0);
    assert!(dead.died_at_ms >= envelope.errors[1].at_ms);
    assert_eq!(dead.parse_error, None);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_fatal_failure_is_dead_lettered_at_once() {
    let (backend, log, running) = start(u32::MAX, || JobError::fatal("invalid address")).await;
    let producer = producer(backend.clone()).await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 1).await;
    assert_eq!(log.lock().unwrap().len(), 1);
    let dead = backend.dead_letters("t.work").remove(0);
    assert_eq!(
        (dead.attempts, dead.reason.as_str()),
        (1, "fatal: invalid address")
    );
    running.stop().await;
}

/// Defers job 0 once; every job takes a second.
struct RateLimited {
    order: Arc<Mutex<Vec<(u32, u32, u32)>>>,
}

impl JobHandler for RateLimited {
    type Job = Single;

    async fn handle(&self, job: Single, ctx: JobContext) -> Result<(), JobError> {
        self.order
            .lock()
            .unwrap()
            .push((job.n, ctx.attempt(), ctx.deferrals()));
        if job.n == 0 && ctx.deferrals() == 0 {
            return Err(JobError::deferred_msg(
                Duration::from_secs(10),
                "429 Too Many Requests",
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_429_defers_without_spending_an_attempt_and_returns_ahead_of_the_backlog() {
    let backend = Arc::new(MemoryBackend::new());
    let order = Arc::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(RateLimited {
            order: Arc::clone(&order),
        })
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    producer.enqueue(&Single { n: 0 }).await.unwrap();
    wait_until(|| backend.held_count("t.single") == 1).await;
    let backlog: Vec<Single> = (1..=50).map(|n| Single { n }).collect();
    assert!(
        producer
            .enqueue_batch(&backlog)
            .await
            .iter()
            .all(Result::is_ok)
    );
    wait_until(|| handle.jobs_settled() == 52).await;

    let order = order.lock().unwrap().clone();
    let back = order
        .iter()
        .position(|e| e.0 == 0 && e.2 == 1)
        .expect("job 0 came back");
    assert_eq!(order[back], (0, 1, 1), "attempt unchanged, deferrals + 1");
    // Ten seconds of one-second jobs ran before it came back; the other 40
    // waited behind it.
    assert!(
        (10..=13).contains(&back),
        "came back at position {back}: {order:?}"
    );
    running.stop().await;
}

struct Panics {
    calls: Arc<Mutex<u32>>,
}

impl JobHandler for Panics {
    type Job = Task;

    async fn handle(&self, _job: Task, _ctx: JobContext) -> Result<(), JobError> {
        let first = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls == 1
        };
        assert!(!first, "the first attempt panics");
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_panic_is_retried_and_the_worker_keeps_running() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(Mutex::new(0));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(Panics {
            calls: Arc::clone(&calls),
        })
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| handle.jobs_settled() == 2).await;
    assert_eq!(*calls.lock().unwrap(), 2);
    assert!(backend.dead_letters("t.work").is_empty());
    running.stop().await;
}

struct Slow {
    calls: Arc<Mutex<Vec<Instant>>>,
}

impl JobHandler for Slow {
    type Job = Task;

    async fn handle(&self, _job: Task, _ctx: JobContext) -> Result<(), JobError> {
        let first = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(Instant::now());
            calls.len() == 1
        };
        if first {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn the_default_timeout_bounds_an_attempt_which_is_then_retried() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(Slow {
            calls: Arc::clone(&calls),
        })
        .job_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    let started = Instant::now();
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    wait_until(|| handle.jobs_settled() == 2).await;
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    // Five seconds of timeout, then the queue's one-second backoff.
    assert_eq!(calls[1] - started, Duration::from_secs(6));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_30_day_retry_after_is_dead_lettered_with_a_reason_not_released_early() {
    let (backend, log, running) = start(1, || {
        JobError::deferred_msg(Duration::from_secs(30 * 24 * 3600), "429 from the API")
    })
    .await;
    producer(backend.clone())
        .await
        .enqueue(&Task { n: 1 })
        .await
        .unwrap();
    wait_until(|| running.handle.jobs_finished() == 1).await;
    assert_eq!(backend.held_count("t.work"), 0, "nothing parked in a hold");
    let dead = backend.dead_letters("t.work");
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0]
            .reason
            .starts_with("a deferral of 2592000 s is longer than a hold can keep (24 days)"),
        "{}",
        dead[0].reason
    );
    assert_eq!(log.lock().unwrap().len(), 1, "the job never ran again");
    running.stop().await;
}
