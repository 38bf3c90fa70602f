//! Job results through the worker on the memory backend: the final outcome
//! of a job reaches the caller that waits for it, and nothing in between.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::{EnqueueOptions, Job, JobContext, JobError, Queues, WaitError, handler_fn};
use queuey_tower::Worker;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::support::{Task, TestQueues, producer, spawn, wait_until};

/// Prices an order on `t.work` (three attempts, 1 s apart).
#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(queue = TestQueues::Work, name = "price", output = Quote)]
struct Price {
    items: u32,
    /// Fail this many attempts first, transiently.
    failures: u32,
    /// Fail fatally instead.
    fatal: bool,
    /// Take this long.
    nap_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Quote {
    cents: u64,
    attempt: u32,
}

impl Price {
    fn of(items: u32) -> Self {
        Price {
            items,
            failures: 0,
            fatal: false,
            nap_ms: 0,
        }
    }
}

/// A worker pricing orders, counting its calls.
async fn worker(backend: &Arc<MemoryBackend>, calls: &Arc<AtomicU32>) -> crate::support::Running {
    let calls = Arc::clone(calls);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .concurrency(256)
        .handler(handler_fn(move |job: Price, ctx: JobContext| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(job.nap_ms)).await;
                if job.fatal {
                    return Err(JobError::fatal("the order is void"));
                }
                if ctx.attempt() <= job.failures {
                    return Err(JobError::retryable(std::io::Error::other(
                        "prices are down",
                    )));
                }
                Ok(Quote {
                    cents: u64::from(job.items) * 250,
                    attempt: ctx.attempt(),
                })
            }
        }))
        .build()
        .await
        .unwrap();
    spawn(worker)
}

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn the_caller_gets_the_handlers_value() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    let quote = producer
        .enqueue_and_wait(&Price::of(4), WAIT)
        .await
        .unwrap();
    assert_eq!(
        quote,
        Quote {
            cents: 1000,
            attempt: 1
        }
    );
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn retries_are_invisible_and_the_success_answers() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    let job = Price {
        failures: 2,
        ..Price::of(1)
    };
    let started = Instant::now();
    let quote = producer.enqueue_and_wait(&job, WAIT).await.unwrap();
    // Two retries of 1 s each, held on the backend, then the answer.
    assert_eq!(quote.attempt, 3);
    assert!(started.elapsed() >= Duration::from_secs(2));
    wait_until(|| running.handle.jobs_finished() >= 1).await;
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_dead_lettered_job_tells_the_caller_why() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    let fatal = Price {
        fatal: true,
        ..Price::of(1)
    };
    let error = producer.enqueue_and_wait(&fatal, WAIT).await.unwrap_err();
    assert!(
        matches!(&error, WaitError::DeadLettered { reason, job_type: "price", .. } if reason.contains("the order is void")),
        "{error:?}"
    );
    // Attempts run out: the last failure answers, not the first two.
    let exhausted = Price {
        failures: 5,
        ..Price::of(1)
    };
    let error = producer
        .enqueue_and_wait(&exhausted, WAIT)
        .await
        .unwrap_err();
    assert!(matches!(error, WaitError::DeadLettered { .. }), "{error:?}");
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 3);
    assert_eq!(backend.dead_letters(TestQueues::Work.name()).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_past_its_deadline_tells_the_caller() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    // The retry would come back after 1 s, past the deadline.
    let job = Price {
        failures: 1,
        ..Price::of(1)
    };
    let options = EnqueueOptions::default().deadline_in(Duration::from_millis(500));
    let error = producer
        .enqueue_and_wait_with(&job, options, WAIT)
        .await
        .unwrap_err();
    assert!(
        matches!(error, WaitError::DeadlinePassed { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("deadline passed"), "{error}");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_callers_timeout_ends_the_wait_never_early_and_the_job_goes_on() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    let slow = Price {
        nap_ms: 10_000,
        ..Price::of(1)
    };
    let started = Instant::now();
    let error = producer
        .enqueue_and_wait(&slow, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert!(
        matches!(error, WaitError::TimedOut { timeout, .. } if timeout == Duration::from_secs(2)),
        "{error:?}"
    );
    assert!(error.to_string().contains("may still run"), "{error}");
    // The job finishes all the same; its reply finds nobody and is dropped.
    wait_until(|| running.handle.jobs_finished() >= 1).await;
    assert_eq!(backend.unacked_count(TestQueues::Work.name()), 0);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn fire_and_forget_jobs_of_a_type_with_an_output_still_work() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    for items in 0..10 {
        producer.enqueue(&Price::of(items)).await.unwrap();
    }
    wait_until(|| running.handle.jobs_finished() >= 10).await;
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 10);
    assert!(backend.dead_letters(TestQueues::Work.name()).is_empty());
}

#[tokio::test(start_paused = true)]
async fn many_callers_each_get_their_own_answer() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = Arc::new(producer(backend.clone()).await);
    let waits = (0..200u32).map(|items| {
        let producer = Arc::clone(&producer);
        tokio::spawn(async move {
            let job = Price {
                nap_ms: u64::from(200 - items),
                ..Price::of(items)
            };
            (items, producer.enqueue_and_wait(&job, WAIT).await)
        })
    });
    for wait in futures::future::join_all(waits).await {
        let (items, quote) = wait.unwrap();
        assert_eq!(quote.unwrap().cents, u64::from(items) * 250);
    }
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_no_handler_takes_answers_with_its_dead_letter_reason() {
    let backend = Arc::new(MemoryBackend::new());
    // A worker of `t.work` that handles `Task` only.
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: Task, _: JobContext| async { Ok(()) }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    let error = producer
        .enqueue_and_wait(&Price::of(1), WAIT)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, WaitError::DeadLettered { reason, .. } if reason.contains("no handler for job type `price`")),
        "{error:?}"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_does_not_decode_answers_with_its_dead_letter_reason() {
    /// Another type under the name `price`, whose payload `Price` cannot read.
    #[derive(Job, Serialize, Deserialize)]
    #[job(queue = TestQueues::Work, name = "price", output = Quote)]
    struct Impostor {
        colour: String,
    }
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::new(AtomicU32::new(0));
    let running = worker(&backend, &calls).await;
    let producer = producer(backend.clone()).await;
    let job = Impostor {
        colour: "red".into(),
    };
    let error = producer.enqueue_and_wait(&job, WAIT).await.unwrap_err();
    assert!(
        matches!(&error, WaitError::DeadLettered { reason, .. } if reason.contains("does not decode")),
        "{error:?}"
    );
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn closing_the_backend_ends_every_wait_at_once() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    // No worker: the job waits on its queue.
    let waiting = tokio::spawn({
        let producer = producer.clone();
        async move { producer.enqueue_and_wait(&Price::of(1), WAIT).await }
    });
    wait_until(|| backend.ready_count(TestQueues::Work.name()) == 1).await;
    let closed_at = Instant::now();
    backend.close();
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(closed_at.elapsed(), Duration::ZERO);
    assert!(matches!(error, WaitError::ReplyLost { .. }), "{error:?}");
}

#[tokio::test(start_paused = true)]
async fn a_delayed_job_cannot_be_waited_for() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    let options = EnqueueOptions::default().delay(Duration::from_secs(5));
    let error = producer
        .enqueue_and_wait_with(&Price::of(1), options, WAIT)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, WaitError::Enqueue(queuey_core::Error::InvalidConfig(text)) if text.contains("without waiting")),
        "{error:?}"
    );
    assert_eq!(backend.ready_count(TestQueues::Work.name()), 0);
    assert_eq!(backend.held_count(TestQueues::Work.name()), 0);
}
