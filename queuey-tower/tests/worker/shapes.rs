//! The three shapes of a handler's stack: the default stack, the default
//! stack with layers of the handler's own, and layers instead of it; the
//! job timeout means the same in each, and the attempts a handler is told
//! are the ones its stack allows.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::{Backoff, JobContext, JobError, JobHandler, RetryPolicy, handler_fn};

use queuey_core::memory::MemoryBackend;
use queuey_tower::cooldown::CooldownLayer;
use queuey_tower::dead_letter::DeadLetterLayer;
use queuey_tower::retry::RetryLayer;
use queuey_tower::{JobRequest, Worker};
use tokio::time::Instant;
use tower::layer::util::Identity;
use tower::limit::ConcurrencyLimitLayer;

use crate::support::{Single, Task, TestQueues, producer, spawn, wait_until};

/// Records each call's `max_attempts` and whether the context calls it the
/// last attempt, and always fails transiently.
fn failing(seen: &Arc<Mutex<Vec<(u32, bool)>>>) -> impl JobHandler<Job = Task> + use<> {
    let seen = Arc::clone(seen);
    handler_fn(move |_: Task, ctx: JobContext| {
        let seen = Arc::clone(&seen);
        async move {
            seen.lock()
                .unwrap()
                .push((ctx.max_attempts(), ctx.is_last_attempt()));
            Err::<(), _>(JobError::retryable("x"))
        }
    })
}

/// Runs one `Task` through `worker` until it is dead-lettered.
async fn one_dead_task(
    backend: &Arc<MemoryBackend>,
    worker: Worker<TestQueues, Arc<MemoryBackend>>,
) {
    let running = spawn(worker);
    producer(backend.clone())
        .await
        .enqueue(&Task { n: 1 })
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 1).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_handler_is_told_the_attempts_its_stack_allows() {
    // `t.work` allows three attempts, and the default stack retries.
    let backend = Arc::new(MemoryBackend::new());
    let seen = Arc::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(failing(&seen))
        .build()
        .await
        .unwrap();
    one_dead_task(&backend, worker).await;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(3, false), (3, false), (3, true)]
    );

    // No retry layer: one attempt, whatever the queue's policy says.
    let backend = Arc::new(MemoryBackend::new());
    let seen = Arc::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_without_default_stack(failing(&seen), DeadLetterLayer::new())
        .build()
        .await
        .unwrap();
    one_dead_task(&backend, worker).await;
    assert_eq!(*seen.lock().unwrap(), vec![(1, true)]);
    assert_eq!(backend.dead_letters("t.work")[0].reason, "x");

    // A queue without a policy: the retry layer's own.
    let backend = Arc::new(MemoryBackend::new());
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let log = Arc::clone(&seen);
    let policy = RetryPolicy::new(4, Backoff::None).unwrap();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_without_default_stack(
            handler_fn(move |_: Single, ctx: JobContext| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().unwrap().push(ctx.max_attempts());
                    Err::<(), _>(JobError::retryable("x"))
                }
            }),
            RetryLayer::new(policy),
        )
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    producer(backend.clone())
        .await
        .enqueue(&Single { n: 1 })
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.single").len() == 1).await;
    running.stop().await;
    assert_eq!(*seen.lock().unwrap(), vec![4, 4, 4, 4]);
}

/// Hangs on the first call (the flag says whether that call ever
/// finished) and succeeds on the next.
fn hangs_once(
    finished_first: &Arc<AtomicBool>,
    calls: &Arc<AtomicU32>,
) -> impl JobHandler<Job = Task> + use<> {
    let (finished_first, calls) = (Arc::clone(finished_first), Arc::clone(calls));
    handler_fn(move |_: Task, ctx: JobContext| {
        let (finished_first, calls) = (Arc::clone(&finished_first), Arc::clone(&calls));
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            if ctx.attempt() == 1 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                finished_first.store(true, Ordering::SeqCst);
            }
            Ok::<(), JobError>(())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn the_job_timeout_bounds_each_call_of_the_handler_in_every_shape() {
    for shape in ["handler", "handler_with", "handler_without_default_stack"] {
        let backend = Arc::new(MemoryBackend::new());
        let (finished_first, calls) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU32::new(0)),
        );
        let handler = hangs_once(&finished_first, &calls);
        let builder =
            Worker::<TestQueues, _>::builder(backend.clone()).job_timeout(Duration::from_secs(2));
        let worker = match shape {
            "handler" => builder.handler(handler).build().await,
            "handler_with" => builder.handler_with(handler, Identity::new()).build().await,
            _ => {
                builder
                    .handler_without_default_stack(handler, RetryLayer)
                    .build()
                    .await
            }
        }
        .unwrap();
        let running = spawn(worker);
        producer(backend.clone())
            .await
            .enqueue(&Task { n: 1 })
            .await
            .unwrap();
        wait_until(|| running.handle.jobs_finished() == 1).await;
        running.stop().await;
        // The first call was cut at the timeout and the job retried.
        assert_eq!(calls.load(Ordering::SeqCst), 2, "{shape}");
        assert!(!finished_first.load(Ordering::SeqCst), "{shape}");
        assert!(backend.dead_letters("t.work").is_empty(), "{shape}");
    }
}

/// Jobs 0..10 call a rate-limited host ("slow"), the others another one.
fn host(request: &JobRequest<Task>) -> Option<&'static str> {
    Some(if request.job().n < 10 { "slow" } else { "fast" })
}

#[tokio::test(start_paused = true)]
async fn a_layer_typed_for_one_job_goes_with_its_handler_beside_other_job_types() {
    let backend = Arc::new(MemoryBackend::new());
    let calls: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let told = Arc::new(AtomicBool::new(false));
    let log = Arc::clone(&calls);
    let webhooks = handler_fn(move |job: Task, _: JobContext| {
        let (log, told) = (Arc::clone(&log), Arc::clone(&told));
        async move {
            log.lock().unwrap().push((job.n, Instant::now()));
            if job.n < 10 && !told.swap(true, Ordering::SeqCst) {
                return Err(JobError::deferred(Duration::from_secs(30)));
            }
            Ok(())
        }
    });
    let singles = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&singles);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: Single, _: JobContext| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), JobError>(()) }
        }))
        // Inside the default stack, beside its deferral layer.
        .handler_with(
            webhooks,
            tower::ServiceBuilder::new()
                .layer(CooldownLayer::new(host))
                .layer(ConcurrencyLimitLayer::new(4)),
        )
        // One job at a time, so the 429 is answered before the next job.
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    for n in 0..20 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    producer.enqueue(&Single { n: 0 }).await.unwrap();
    wait_until(|| running.handle.jobs_finished() == 21).await;
    running.stop().await;

    let calls = calls.lock().unwrap().clone();
    let slow: Vec<_> = calls.iter().filter(|c| c.0 < 10).collect();
    assert_eq!(calls.iter().filter(|c| c.0 >= 10).count(), 10);
    // One call answered 429, then each slow job once, after the cool-down.
    assert_eq!(slow.len(), 11, "{slow:?}");
    let told_at = slow[0].1;
    for (n, at) in &slow[1..] {
        assert!(
            *at >= told_at + Duration::from_secs(30),
            "job {n} called inside the cool-down"
        );
    }
    assert_eq!(singles.load(Ordering::SeqCst), 1);
    assert!(backend.dead_letters("t.work").is_empty());
}
