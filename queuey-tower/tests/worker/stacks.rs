//! Stacks in a worker: the classic tower stack, tower's middleware unchanged, state
//! that persists across jobs, one classifier for every layer, `.layer()`
//! around the defaults, and the settings a stack would ignore.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use queuey_core::{Error, JobContext, JobError, handler_fn};

use queuey_core::memory::MemoryBackend;
use queuey_tower::classify::FailureClass;
use queuey_tower::dead_letter::DeadLetterLayer;
use queuey_tower::defer::DeferOn429;
use queuey_tower::retry::RetryLayer;
use queuey_tower::{JobRequest, ServiceBuilder, Worker};
use tower::buffer::BufferLayer;
use tower::limit::{ConcurrencyLimitLayer, RateLimitLayer};
use tower::load_shed::LoadShedLayer;
use tower::util::{BoxCloneService, BoxService};
use tower::{Layer, Service};

use crate::support::{Running, Task, TestQueues, producer, spawn, wait_until};

/// A handler on `t.work` that counts the jobs running at once and naps.
#[derive(Clone, Default)]
struct Gauge {
    running: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
    done: Arc<AtomicU32>,
}

impl Gauge {
    fn handler(&self, nap: Duration) -> impl queuey_core::JobHandler<Job = Task> + use<> {
        let gauge = self.clone();
        handler_fn(move |_: Task, _: JobContext| {
            let gauge = gauge.clone();
            async move {
                let now = gauge.running.fetch_add(1, Ordering::SeqCst) + 1;
                gauge.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(nap).await;
                gauge.running.fetch_sub(1, Ordering::SeqCst);
                gauge.done.fetch_add(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        })
    }

    fn peak(&self) -> u32 {
        self.peak.load(Ordering::SeqCst)
    }

    fn done(&self) -> u32 {
        self.done.load(Ordering::SeqCst)
    }
}

async fn enqueue(backend: &Arc<MemoryBackend>, jobs: u32) {
    let producer = producer(backend.clone()).await;
    for n in 0..jobs {
        producer.enqueue(&Task { n }).await.unwrap();
    }
}

/// Runs `jobs` jobs through a worker built by `build`, returning the worker
/// once they are all done.
async fn run_jobs<F, Fut>(jobs: u32, gauge: &Gauge, build: F) -> (Arc<MemoryBackend>, Running)
where
    F: FnOnce(Arc<MemoryBackend>) -> Fut,
    Fut: Future<Output = Worker<TestQueues, Arc<MemoryBackend>>>,
{
    let backend = Arc::new(MemoryBackend::new());
    let running = spawn(build(backend.clone()).await);
    enqueue(&backend, jobs).await;
    wait_until(|| gauge.done() == jobs && running.handle.jobs_settled() == u64::from(jobs)).await;
    (backend, running)
}

#[tokio::test(start_paused = true)]
async fn the_classic_tower_stack_goes_into_a_worker_as_written() {
    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::from_millis(1));
    let (_, running) = run_jobs(3, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .handler_without_default_stack(
                handler,
                ServiceBuilder::new().layer(RetryLayer).layer(DeferOn429),
            )
            .build()
            .await
            .unwrap()
    })
    .await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn several_jobs_run_at_once_up_to_the_worker_concurrency() {
    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::from_millis(50));
    let (_, running) = run_jobs(200, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .handler(handler)
            .concurrency(16)
            .build()
            .await
            .unwrap()
    })
    .await;
    assert_eq!(gauge.peak(), 16, "jobs ran one after another");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_concurrency_limit_inside_the_stack_bounds_jobs_in_flight() {
    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::from_millis(50));
    let (backend, running) = run_jobs(40, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .layer(ConcurrencyLimitLayer::new(3))
            .handler(handler)
            .build()
            .await
            .unwrap()
    })
    .await;
    assert_eq!(gauge.peak(), 3);
    assert!(backend.dead_letters("t.work").is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_spaces_jobs_out_and_keeps_its_window_across_jobs() {
    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::ZERO);
    let started = tokio::time::Instant::now();
    let (_, running) = run_jobs(10, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .layer(RateLimitLayer::new(2, Duration::from_secs(1)))
            .handler(handler)
            .build()
            .await
            .unwrap()
    })
    .await;
    // Two per second: ten jobs need four more windows after the first.
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_buffer_and_boxed_services_work_in_a_worker() {
    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::from_millis(1));
    let (_, running) = run_jobs(5, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .handler_without_default_stack(
                handler,
                ServiceBuilder::new()
                    .layer(BufferLayer::new(8))
                    .layer(BoxService::layer())
                    .layer(DeadLetterLayer::new())
                    .layer(RetryLayer),
            )
            .build()
            .await
            .unwrap()
    })
    .await;
    running.stop().await;

    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::from_millis(1));
    let (_, running) = run_jobs(5, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .handler_without_default_stack(
                handler,
                ServiceBuilder::new()
                    .layer(BoxCloneService::layer())
                    .layer(RetryLayer),
            )
            .build()
            .await
            .unwrap()
    })
    .await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_load_shed_job_is_deferred_without_spending_an_attempt() {
    let seen: Arc<Mutex<Vec<(u32, u32, u32)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let handler = handler_fn(move |job: Task, ctx: JobContext| {
        let log = Arc::clone(&log);
        async move {
            log.lock()
                .unwrap()
                .push((job.n, ctx.attempt(), ctx.deferrals()));
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<(), JobError>(())
        }
    });
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .layer(LoadShedLayer::new())
        .layer(ConcurrencyLimitLayer::new(1))
        .handler(handler)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    enqueue(&backend, 2).await;
    wait_until(|| seen.lock().unwrap().len() == 2 && running.handle.in_flight() == 0).await;
    let seen = seen.lock().unwrap().clone();
    // Job 1 was shed while job 0 ran, then came back deferred, attempt 1.
    assert_eq!(seen[0], (0, 1, 0));
    assert_eq!(seen[1], (1, 1, 1));
    assert!(backend.dead_letters("t.work").is_empty());
    running.stop().await;
}

/// Middleware of a user's own: not `Clone`, with state (a job counter) that
/// must persist across jobs.
struct Numbering<S> {
    inner: S,
    next: u32,
    seen: Arc<Mutex<Vec<u32>>>,
}

impl<S, J> Service<JobRequest<J>> for Numbering<S>
where
    S: Service<JobRequest<J>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: JobRequest<J>) -> S::Future {
        self.next += 1;
        self.seen.lock().unwrap().push(self.next);
        self.inner.call(request)
    }
}

struct NumberingLayer(Arc<Mutex<Vec<u32>>>);

impl<S> Layer<S> for NumberingLayer {
    type Service = Numbering<S>;

    fn layer(&self, inner: S) -> Numbering<S> {
        Numbering {
            inner,
            next: 0,
            seen: Arc::clone(&self.0),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn stateful_middleware_is_one_instance_across_jobs() {
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let gauge = Gauge::default();
    let handler = gauge.handler(Duration::from_millis(5));
    let layer = NumberingLayer(Arc::clone(&seen));
    let (_, running) = run_jobs(6, &gauge, |backend| async move {
        Worker::<TestQueues, _>::builder(backend)
            .layer(layer)
            .handler(handler)
            .build()
            .await
            .unwrap()
    })
    .await;
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    running.stop().await;
}

/// A client error with a status, classified by the worker's classifier.
#[derive(Debug)]
struct Http(u16);

impl std::fmt::Display for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.0)
    }
}

impl std::error::Error for Http {}

#[tokio::test(start_paused = true)]
async fn one_classifier_is_read_by_retry_deferral_and_dead_letter() {
    let calls: Arc<Mutex<Vec<(u32, u32, u32)>>> = Arc::default();
    let log = Arc::clone(&calls);
    let classified = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&classified);
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .classifier(move |e: &(dyn std::error::Error + 'static)| {
            let http = e.downcast_ref::<Http>()?;
            counter.fetch_add(1, Ordering::SeqCst);
            Some(match http.0 {
                429 => FailureClass::RetryAfter(Duration::from_secs(7)),
                404 => FailureClass::Fatal,
                _ => FailureClass::Transient,
            })
        })
        .handler(handler_fn(move |job: Task, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock()
                    .unwrap()
                    .push((job.n, ctx.attempt(), ctx.deferrals()));
                match (job.n, ctx.deferrals()) {
                    (429, 0) => Err(JobError::retryable(Http(429))),
                    (404, _) => Err(JobError::retryable(Http(404))),
                    _ => Ok(()),
                }
            }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    producer.enqueue(&Task { n: 429 }).await.unwrap();
    producer.enqueue(&Task { n: 404 }).await.unwrap();
    wait_until(|| running.handle.jobs_settled() == 3).await;
    let calls = calls.lock().unwrap().clone();
    // The 429 was deferred (no attempt spent) by DeferOn429 reading the
    // worker's classifier; the 404 was not retried, as it told RetryLayer.
    assert!(calls.contains(&(429, 1, 1)), "{calls:?}");
    assert_eq!(calls.iter().filter(|c| c.0 == 404).count(), 1, "{calls:?}");
    let dead = backend.dead_letters("t.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "fatal: HTTP 404");
    assert!(classified.load(Ordering::SeqCst) >= 2);
    running.stop().await;

    // Without a deferral layer, the dead-letter layer defers what the
    // classifier calls a wait instead of dead-lettering it.
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .classifier(|e: &(dyn std::error::Error + 'static)| {
            e.downcast_ref::<Http>()
                .map(|_| FailureClass::RetryAfter(Duration::from_secs(7)))
        })
        .handler_without_default_stack(
            handler_fn(|_: Task, ctx: JobContext| async move {
                if ctx.deferrals() == 0 {
                    return Err(JobError::retryable(Http(429)));
                }
                Ok(())
            }),
            DeadLetterLayer::new(),
        )
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    enqueue(&backend, 1).await;
    let started = tokio::time::Instant::now();
    wait_until(|| running.handle.jobs_settled() == 2).await;
    assert!(started.elapsed() >= Duration::from_secs(7));
    assert!(backend.dead_letters("t.work").is_empty());
    running.stop().await;
}

/// Counts the jobs that pass, to show a layer added with `.layer()` runs.
#[derive(Clone)]
struct CountLayer(Arc<AtomicU32>);

impl<S> Layer<S> for CountLayer {
    type Service = Count<S>;

    fn layer(&self, inner: S) -> Count<S> {
        Count(inner, Arc::clone(&self.0))
    }
}

struct Count<S>(S, Arc<AtomicU32>);

impl<S, R> Service<R> for Count<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.call(request)
    }
}

#[tokio::test(start_paused = true)]
async fn a_layer_goes_around_the_default_stack_which_stays() {
    let counted = Arc::new(AtomicU32::new(0));
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .layer(CountLayer(Arc::clone(&counted)))
        .job_timeout(Duration::from_secs(2))
        .handler(handler_fn(|job: Task, ctx: JobContext| async move {
            match (job.n, ctx.attempt(), ctx.deferrals()) {
                // retry
                (1, 1, _) => Err(JobError::retryable("flaky")),
                // deferral
                (2, _, 0) => Err(JobError::deferred(Duration::from_secs(60))),
                // timeout, then retried
                (3, 1, _) => {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    Ok(())
                }
                // dead letter
                (4, _, _) => Err(JobError::fatal("no such account")),
                _ => Ok(()),
            }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    for n in 1..=4 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    // 4 first deliveries, then job 1 retried, 2 deferred, 3 retried.
    wait_until(|| running.handle.jobs_settled() == 7).await;
    assert_eq!(counted.load(Ordering::SeqCst), 7);
    let dead = backend.dead_letters("t.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "fatal: no such account");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_layer_with_no_handler_to_wrap_is_refused_at_build_time() {
    let backend = Arc::new(MemoryBackend::new());
    let result = Worker::<TestQueues, _>::builder(backend.clone())
        .layer(DeadLetterLayer::new())
        .build()
        .await;
    let Err(Error::InvalidConfig(message)) = result else {
        panic!("not refused");
    };
    assert!(message.contains("no handler for them"), "{message}");
    assert!(message.contains("handler_with"), "{message}");
}
