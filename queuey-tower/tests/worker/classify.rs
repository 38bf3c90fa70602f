//! One order of classification in a worker: queuey's own intent errors
//! first, then the worker's classifier, then the defaults.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::{Backoff, Job, JobContext, JobError, RetryPolicy, handler_fn};

use queuey_core::memory::MemoryBackend;
use queuey_tower::classify::FailureClass;
use queuey_tower::defer::DeferOn429;
use queuey_tower::retry::RetryLayer;
use queuey_tower::{ServiceBuilder, Worker};
use serde::{Deserialize, Serialize};

use crate::support::{Running, TestQueues, producer, spawn, wait_until};

/// A job on `t.single`, which sets no retry policy of its own.
#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(queue = TestQueues::Single, name = "rate_limited")]
struct RateLimited;

/// A client's `429 Too Many Requests`.
#[derive(Debug)]
struct TooManyRequests;

impl std::fmt::Display for TooManyRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HTTP 429")
    }
}

impl std::error::Error for TooManyRequests {}

fn calls_429_a_wait(e: &(dyn std::error::Error + 'static)) -> Option<FailureClass> {
    e.downcast_ref::<TooManyRequests>()
        .map(|_| FailureClass::RetryAfter(Duration::from_millis(20)))
}

/// Runs one `RateLimited` job through `worker`, whose handler always fails
/// with the 429, until it is dead-lettered; returns the `(attempt,
/// deferrals)` of every call and the dead letter's reason.
async fn until_dead(
    backend: Arc<MemoryBackend>,
    worker: Worker<TestQueues, Arc<MemoryBackend>>,
    calls: Arc<Mutex<Vec<(u32, u32)>>>,
) -> (Vec<(u32, u32)>, String) {
    let running: Running = spawn(worker);
    producer(backend.clone())
        .await
        .enqueue(&RateLimited)
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.single").len() == 1).await;
    running.stop().await;
    let reason = backend.dead_letters("t.single")[0].reason.clone();
    let calls = calls.lock().unwrap().clone();
    (calls, reason)
}

fn always_429(
    calls: &Arc<Mutex<Vec<(u32, u32)>>>,
) -> impl queuey_core::JobHandler<Job = RateLimited> + use<> {
    let calls = Arc::clone(calls);
    handler_fn(move |_: RateLimited, ctx: JobContext| {
        let calls = Arc::clone(&calls);
        async move {
            calls.lock().unwrap().push((ctx.attempt(), ctx.deferrals()));
            Err::<(), _>(JobError::retryable(TooManyRequests))
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_classifier_of_yours_cannot_defer_a_job_past_its_deferral_limit() {
    // Deferred three times, then the limit spends an attempt; on the second
    // (last) attempt the limit is still reached: dead-lettered.
    let expected_calls = vec![(1, 0), (1, 1), (1, 2), (1, 3), (2, 3)];
    let expected_reason =
        "attempts exhausted (2 of 2): deferred 3 times already, the limit is 3: HTTP 429";

    // Two attempts, a second apart, and at most three deferrals.
    let limits = || {
        let policy = RetryPolicy::new(2, Backoff::fixed(Duration::from_secs(1)).unwrap()).unwrap();
        ServiceBuilder::new()
            .layer(RetryLayer::new(policy))
            .layer(DeferOn429::new().max_deferrals(3))
    };

    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .classifier(calls_429_a_wait)
        .handler_with(always_429(&calls), limits())
        .build()
        .await
        .unwrap();
    let (seen, reason) = until_dead(backend, worker, calls).await;
    assert_eq!(seen, expected_calls);
    assert_eq!(reason, expected_reason);

    // The same with the limits instead of the default stack.
    let backend = Arc::new(MemoryBackend::new());
    let calls = Arc::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .classifier(calls_429_a_wait)
        .handler_without_default_stack(always_429(&calls), limits())
        .build()
        .await
        .unwrap();
    let (seen, reason) = until_dead(backend, worker, calls).await;
    assert_eq!(seen, expected_calls);
    assert_eq!(reason, expected_reason);
}
