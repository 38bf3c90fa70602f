//! The worker outlives its connection: consumers come back, the handle
//! shows it, stale deliveries are counted, and only what cannot heal stops
//! `run`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use queuey_core::backend::ConnectionState;

use queuey_core::{Error, JobContext, JobError, handler_fn};
use queuey_tower::{Worker, WorkerError};
use tokio::sync::Notify;

use crate::faulty::FaultyBackend;
use crate::support::{Running, Task, TestQueues, bounded, producer, spawn, wait_until};

/// A worker on `backend` whose handler counts its calls and, for job 0,
/// waits until `release` is notified.
async fn worker(
    backend: &FaultyBackend,
    concurrency: usize,
    calls: &Arc<AtomicU32>,
    release: &Arc<Notify>,
) -> Worker<TestQueues, FaultyBackend> {
    let (calls, release) = (Arc::clone(calls), Arc::clone(release));
    Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |job: Task, _: JobContext| {
            let (calls, release) = (Arc::clone(&calls), Arc::clone(&release));
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                if job.n == 0 {
                    release.notified().await;
                }
                Ok::<(), JobError>(())
            }
        }))
        .concurrency(concurrency)
        .build()
        .await
        .unwrap()
}

async fn enqueue(backend: &FaultyBackend, jobs: impl IntoIterator<Item = u32>) {
    let producer = producer(backend.clone()).await;
    for n in jobs {
        producer.enqueue(&Task { n }).await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_consumer_is_consumed_again_and_the_worker_keeps_running() {
    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::default(), Arc::new(Notify::new()));
    let running = spawn(worker(&backend, 4, &calls, &release).await);
    enqueue(&backend, 1..=3).await;
    wait_until(|| running.handle.jobs_settled() == 3).await;

    backend.cut();
    wait_until(|| running.handle.consumer_restarts() == 1).await;
    assert_eq!(
        running.handle.connection_state(),
        ConnectionState::Connected
    );
    enqueue(&backend, 4..=6).await;
    wait_until(|| running.handle.jobs_settled() == 6).await;
    assert_eq!(backend.consumes.load(Ordering::SeqCst), 2);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn transient_consume_failures_are_retried_with_backoff_until_one_works() {
    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::default(), Arc::new(Notify::new()));
    let running = spawn(worker(&backend, 4, &calls, &release).await);
    tokio::time::sleep(Duration::from_millis(10)).await;
    backend.fail_consumes.store(5, Ordering::SeqCst);
    let cut_at = tokio::time::Instant::now();
    backend.cut();
    wait_until(|| running.handle.queues_reconnecting() == 1).await;
    assert_eq!(
        running.handle.connection_state(),
        ConnectionState::Reconnecting
    );
    wait_until(|| running.handle.consumer_restarts() == 1).await;
    // Five failures, each after a backoff of at least 50 ms, growing.
    assert!(cut_at.elapsed() >= Duration::from_millis(50 + 100 + 200 + 400 + 800));
    assert_eq!(backend.consumes.load(Ordering::SeqCst), 1 + 6);
    assert_eq!(running.handle.queues_reconnecting(), 0);
    enqueue(&backend, 1..=2).await;
    wait_until(|| running.handle.jobs_settled() == 2).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn what_cannot_heal_stops_run_at_once_with_an_error_saying_so() {
    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::default(), Arc::new(Notify::new()));
    let running = spawn(worker(&backend, 4, &calls, &release).await);
    tokio::time::sleep(Duration::from_millis(10)).await;
    backend.refuse_consumes.store(1, Ordering::SeqCst);
    backend.cut();
    let err = bounded(running.join()).await.unwrap_err();
    assert!(
        matches!(&err, WorkerError::Consume { source: Error::Backend(e), .. } if e.message().contains("ACCESS_REFUSED")),
        "{err:?}"
    );

    let backend = FaultyBackend::default();
    let running = spawn(worker(&backend, 4, &calls, &release).await);
    tokio::time::sleep(Duration::from_millis(10)).await;
    backend.set_state(ConnectionState::Failed);
    backend.cut();
    let err = bounded(running.join()).await.unwrap_err();
    assert!(matches!(&err, WorkerError::BackendFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("gave up"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_worker_has_no_deadline_of_its_own_and_stops_when_its_backend_gives_up() {
    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::default(), Arc::new(Notify::new()));
    let mut running = spawn(worker(&backend, 4, &calls, &release).await);
    tokio::time::sleep(Duration::from_millis(10)).await;
    backend.fail_consumes.store(u32::MAX, Ordering::SeqCst);
    backend.cut();
    // An hour of failing consumes while the backend still reconnects: the
    // worker keeps trying.
    let still_running = tokio::time::timeout(Duration::from_secs(3600), &mut running.task).await;
    assert!(
        still_running.is_err(),
        "the worker stopped: {still_running:?}"
    );
    backend.set_state(ConnectionState::Failed);
    let err = bounded(running.task).await.unwrap().unwrap_err();
    assert!(matches!(&err, WorkerError::BackendFailed { .. }), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn a_loss_is_noticed_at_once_with_every_slot_busy_and_stale_settles_are_counted() {
    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::new(AtomicU32::new(0)), Arc::new(Notify::new()));
    // One slot, taken by job 0 until released; job 1 waits on the stream.
    let running = spawn(worker(&backend, 1, &calls, &release).await);
    enqueue(&backend, 0..=1).await;
    wait_until(|| running.handle.jobs_running() == 1).await;

    backend.set_state(ConnectionState::Reconnecting);
    backend.cut();
    let cut_at = tokio::time::Instant::now();
    wait_until(|| running.handle.queues_reconnecting() == 1).await;
    assert!(
        cut_at.elapsed() <= Duration::from_secs(1),
        "noticed after {:?}",
        cut_at.elapsed()
    );
    assert_eq!(running.handle.jobs_running(), 1, "job 0 is still running");
    // The worker waits for the backend's reconnection, not on a pace of
    // its own: no consume while it reconnects, one as soon as it is back.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(backend.consumes.load(Ordering::SeqCst), 1);
    backend.set_state(ConnectionState::Connected);
    let back_at = tokio::time::Instant::now();
    wait_until(|| running.handle.consumer_restarts() == 1).await;
    assert!(
        back_at.elapsed() < Duration::from_millis(50),
        "consumed again after {:?}",
        back_at.elapsed()
    );

    // Job 0's delivery came on the old connection: its settle fails, and the
    // broker delivers it again.
    release.notify_one();
    wait_until(|| running.handle.stale_settles() == 1).await;
    wait_until(|| calls.load(Ordering::SeqCst) >= 3 && running.handle.jobs_running() == 1).await;
    release.notify_one();
    wait_until(|| running.handle.jobs_settled() == 2).await;
    assert_eq!(running.handle.settle_failures(), 1);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_back_a_delivery_taken_but_not_started() {
    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::new(AtomicU32::new(0)), Arc::new(Notify::new()));
    let running = spawn(worker(&backend, 1, &calls, &release).await);
    enqueue(&backend, 0..=1).await;
    wait_until(|| running.handle.jobs_running() == 1).await;
    // Job 1 is peeked, waiting for the slot job 0 holds.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(backend.inner.ready_count("t.work"), 0);

    running.handle.shutdown();
    wait_until(|| backend.inner.ready_count("t.work") == 1).await;
    assert_eq!(
        backend.requeues.load(Ordering::SeqCst),
        1,
        "handed back, not dropped"
    );
    assert_eq!(running.handle.jobs_running(), 1, "job 0 still runs");
    release.notify_one();
    let handle = running.handle.clone();
    running.stop().await;
    assert_eq!(handle.jobs_settled(), 1, "job 0 finished and was settled");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "job 1 was never started");
}

/// A worker on `backend` with the builder's defaults, whose handler
/// succeeds.
async fn default_worker(backend: &FaultyBackend) -> Worker<TestQueues, FaultyBackend> {
    Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .build()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_worker_consumes_again_for_as_long_as_the_backend_reconnects_then_stops_with_its_reason()
{
    let backend = FaultyBackend::default();
    let running = spawn(default_worker(&backend).await);
    tokio::time::sleep(Duration::from_millis(10)).await;
    backend.set_state(ConnectionState::Reconnecting);
    backend.fail_consumes.store(u32::MAX, Ordering::SeqCst);
    backend.cut();
    // Well past the ten minutes workers used to give up after on their own.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!running.task.is_finished(), "the worker gave up by itself");
    assert_eq!(running.handle.queues_reconnecting(), 1);

    // The backend gives up: the worker stops, and says why.
    backend.refuse_consumes.store(1, Ordering::SeqCst);
    backend.set_state(ConnectionState::Failed);
    let err = bounded(running.join()).await.unwrap_err();
    let WorkerError::BackendFailed { queue, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(queue, "t.work");
    assert!(source.to_string().contains("ACCESS_REFUSED"), "{source}");
    let shown = err.to_string();
    assert!(
        shown.contains("gave up") && shown.contains("ACCESS_REFUSED (injected)"),
        "{shown}"
    );
    let chained = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(chained, Some(source.to_string()));
}

#[tokio::test(start_paused = true)]
async fn a_stale_settle_is_counted_once_among_settle_failures_and_left_to_the_backend_by_name() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);

    let backend = FaultyBackend::default();
    let (calls, release) = (Arc::new(AtomicU32::new(0)), Arc::new(Notify::new()));
    let running = spawn(worker(&backend, 1, &calls, &release).await);
    enqueue(&backend, [0]).await;
    wait_until(|| running.handle.jobs_running() == 1).await;
    // Job 0's delivery goes stale while it runs.
    backend.cut();
    wait_until(|| running.handle.consumer_restarts() == 1).await;
    release.notify_one();
    wait_until(|| running.handle.stale_settles() == 1).await;
    release.notify_one();
    wait_until(|| running.handle.jobs_settled() == 1).await;
    running.stop().await;

    let mut settle_failures = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let name = key.key().name().to_owned();
        assert!(
            !name.contains("stale"),
            "the worker counted a stale settle as {name}"
        );
        if let ("queuey_settle_failures_total", DebugValue::Counter(n)) = (name.as_str(), value) {
            settle_failures += n;
        }
    }
    assert_eq!(settle_failures, 1);
}

impl Running {
    /// Waits for `run` to return on its own.
    async fn join(self) -> Result<(), WorkerError> {
        self.task.await.unwrap()
    }
}
