//! The layer around a mock service, on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::store::{Inserted, MemoryStore, Store, StoreError};
use queuey_core::{BoxError, Disposition, JobContext, Uuid};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt, service_fn};

use super::claim::{done_key, running_key};
use super::{BUSY_DELAY, IdempotencyLayer};
use crate::JobRequest;

const QUEUE: &str = "t.work";

fn ctx(id: Uuid) -> JobContext {
    JobContext::new(id, QUEUE)
}

/// A handler that counts its runs, takes `takes` and answers `answer`.
fn counting(
    layer: IdempotencyLayer,
    takes: Duration,
    answer: fn() -> Result<Disposition, BoxError>,
) -> (
    impl tower::Service<JobRequest<()>, Response = Disposition, Error = BoxError, Future = impl Send>
    + Clone,
    Arc<AtomicU32>,
) {
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let stack = ServiceBuilder::new()
        .layer(layer)
        .service(service_fn(move |_: JobRequest<()>| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(takes).await;
                answer()
            }
        }));
    (stack, runs)
}

fn ack() -> Result<Disposition, BoxError> {
    Ok(Disposition::Ack)
}

#[tokio::test(start_paused = true)]
async fn a_job_handled_already_is_acknowledged_without_running() {
    let store = MemoryStore::new();
    let (stack, runs) = counting(IdempotencyLayer::new(store.clone()), Duration::ZERO, ack);
    let id = Uuid::new_v4();
    for _ in 0..3 {
        let answer = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
        assert_eq!(answer.unwrap(), Disposition::Ack);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The record is there, the claim is gone.
    assert!(store.get(&done_key(QUEUE, id)).await.unwrap().is_some());
    assert_eq!(store.get(&running_key(QUEUE, id)).await.unwrap(), None);
    // Another job runs.
    let other = stack.oneshot(JobRequest::new((), ctx(Uuid::new_v4())));
    assert_eq!(other.await.unwrap(), Disposition::Ack);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_record_is_kept_for_the_window() {
    let window = Duration::from_secs(3_600);
    let layer = IdempotencyLayer::new(MemoryStore::new())
        .window(window)
        .unwrap();
    let (stack, runs) = counting(layer, Duration::ZERO, ack);
    let id = Uuid::new_v4();
    stack
        .clone()
        .oneshot(JobRequest::new((), ctx(id)))
        .await
        .unwrap();
    tokio::time::advance(window - Duration::from_millis(1)).await;
    stack
        .clone()
        .oneshot(JobRequest::new((), ctx(id)))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    stack.oneshot(JobRequest::new((), ctx(id))).await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "a copy after the window runs"
    );
}

#[tokio::test(start_paused = true)]
async fn of_two_copies_at_once_one_runs_and_the_other_is_deferred_then_acknowledged() {
    let (stack, runs) = counting(
        IdempotencyLayer::new(MemoryStore::new()),
        Duration::from_secs(5),
        ack,
    );
    let id = Uuid::new_v4();
    let first = tokio::spawn(stack.clone().oneshot(JobRequest::new((), ctx(id))));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let copy = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
    assert_eq!(copy.unwrap(), Disposition::Defer { delay: BUSY_DELAY });
    assert_eq!(first.await.unwrap().unwrap(), Disposition::Ack);
    // The deferred copy comes back and finds the record.
    let back = stack.oneshot(JobRequest::new((), ctx(id))).await;
    assert_eq!(back.unwrap(), Disposition::Ack);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_long_run_keeps_its_claim_past_the_lease() {
    let lease = Duration::from_secs(30);
    let layer = IdempotencyLayer::new(MemoryStore::new()).lease(lease);
    let (stack, runs) = counting(layer, Duration::from_secs(100), ack);
    let id = Uuid::new_v4();
    let first = tokio::spawn(stack.clone().oneshot(JobRequest::new((), ctx(id))));
    // Three leases in, the claim (renewed every 10 s) still holds.
    tokio::time::sleep(Duration::from_secs(95)).await;
    let copy = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
    assert_eq!(copy.unwrap(), Disposition::Defer { delay: BUSY_DELAY });
    assert_eq!(first.await.unwrap().unwrap(), Disposition::Ack);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn the_claim_of_a_runner_that_died_runs_out_and_the_copy_runs() {
    let store = MemoryStore::new();
    let lease = Duration::from_secs(10);
    let layer = IdempotencyLayer::new(store.clone()).lease(lease);
    let (stack, runs) = counting(layer, Duration::ZERO, ack);
    let id = Uuid::new_v4();
    // A runner on a worker that was then killed: its claim is never renewed.
    let key = running_key(QUEUE, id);
    let claimed = store.insert(&key, "dead-runner", lease).await;
    assert_eq!(claimed.unwrap(), Inserted::New);
    let started = Instant::now();
    loop {
        let answer = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
        match answer.unwrap() {
            Disposition::Defer { delay } => tokio::time::sleep(delay).await,
            Disposition::Ack => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(
        started.elapsed() >= lease,
        "the copy ran before the lease ended"
    );
    assert!(started.elapsed() <= lease + BUSY_DELAY);
}

#[tokio::test(start_paused = true)]
async fn an_error_passes_through_and_releases_the_claim() {
    let store = MemoryStore::new();
    let (stack, runs) = counting(IdempotencyLayer::new(store.clone()), Duration::ZERO, || {
        Err("the mail server is busy".into())
    });
    let id = Uuid::new_v4();
    let answer = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
    assert_eq!(answer.unwrap_err().to_string(), "the mail server is busy");
    assert!(store.is_empty(), "neither a record nor a claim is left");
    // The retried delivery runs.
    let retried = stack
        .oneshot(JobRequest::new((), ctx(id).with_attempt(2)))
        .await;
    assert!(retried.is_err());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn other_dispositions_pass_through_unrecorded() {
    let store = MemoryStore::new();
    let (stack, runs) = counting(IdempotencyLayer::new(store.clone()), Duration::ZERO, || {
        Ok(Disposition::Retry {
            delay: Duration::from_secs(5),
        })
    });
    let id = Uuid::new_v4();
    for _ in 0..2 {
        let answer = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
        assert_eq!(
            answer.unwrap(),
            Disposition::Retry {
                delay: Duration::from_secs(5)
            }
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(store.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_job_dropped_mid_run_releases_its_claim() {
    let store = MemoryStore::new();
    let (stack, runs) = counting(
        IdempotencyLayer::new(store.clone()),
        Duration::from_secs(60),
        ack,
    );
    let id = Uuid::new_v4();
    let cut = tokio::time::timeout(
        Duration::from_secs(1),
        stack.clone().oneshot(JobRequest::new((), ctx(id))),
    );
    assert!(cut.await.is_err());
    // The release runs on a task of its own.
    tokio::task::yield_now().await;
    assert!(store.is_empty());
    let again = stack.oneshot(JobRequest::new((), ctx(id))).await;
    assert_eq!(again.unwrap(), Disposition::Ack);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A store that fails every call, at once or never answering.
#[derive(Debug)]
struct Broken {
    hangs: bool,
    calls: AtomicU32,
}

impl Broken {
    fn answer<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, Result<T, StoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hangs {
            futures::future::pending().boxed()
        } else {
            futures::future::ready(Err(StoreError::unavailable("connection refused"))).boxed()
        }
    }
}

impl Store for Broken {
    fn insert<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Duration,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        self.answer()
    }

    fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.answer()
    }

    fn set<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.answer()
    }

    fn extend<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.answer()
    }

    fn remove<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.answer()
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_that_fails_lets_every_job_run() {
    let store = Arc::new(Broken {
        hangs: false,
        calls: AtomicU32::new(0),
    });
    let (stack, runs) = counting(
        IdempotencyLayer::new(Arc::clone(&store)),
        Duration::ZERO,
        ack,
    );
    let id = Uuid::new_v4();
    for _ in 0..2 {
        let answer = stack.clone().oneshot(JobRequest::new((), ctx(id))).await;
        assert_eq!(answer.unwrap(), Disposition::Ack);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2, "at-least-once");
    // One call a delivery: the claim failed, nothing else was asked.
    assert_eq!(store.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_hangs_holds_a_job_for_the_store_timeout_only() {
    let store = Arc::new(Broken {
        hangs: true,
        calls: AtomicU32::new(0),
    });
    let timeout = Duration::from_millis(250);
    let layer = IdempotencyLayer::new(Arc::clone(&store)).store_timeout(timeout);
    let (stack, runs) = counting(layer, Duration::ZERO, ack);
    let started = Instant::now();
    let answer = stack
        .oneshot(JobRequest::new((), ctx(Uuid::new_v4())))
        .await;
    assert_eq!(answer.unwrap(), Disposition::Ack);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), timeout);
}

#[tokio::test]
async fn the_lease_has_a_floor() {
    let layer = IdempotencyLayer::new(MemoryStore::new()).lease(Duration::ZERO);
    assert_eq!(layer.shared.lease, super::MIN_LEASE);
}

#[test]
fn a_window_of_zero_or_over_a_year_is_refused() {
    use queuey_core::store::{MAX_WINDOW, WindowError};
    let layer = || IdempotencyLayer::new(MemoryStore::new());
    assert!(matches!(
        layer().window(Duration::ZERO),
        Err(WindowError::Zero)
    ));
    assert!(matches!(
        layer().window(Duration::MAX),
        Err(WindowError::TooLong { .. })
    ));
    assert_eq!(
        layer().window(MAX_WINDOW).unwrap().shared.window,
        MAX_WINDOW
    );
}

/// The `queuey_idempotency_unguarded_total` counts by reason after `run`.
fn unguarded_after(run: impl AsyncFnOnce()) -> Vec<(String, u64)> {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || runtime.block_on(run()));
    let mut counted: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == super::UNGUARDED_TOTAL)
        .filter_map(|(key, _, _, value)| {
            let reason = key.key().labels().find(|l| l.key() == "reason")?;
            match value {
                DebugValue::Counter(n) => Some((reason.value().to_owned(), n)),
                _ => None,
            }
        })
        .collect();
    counted.sort();
    counted
}

#[test]
fn a_delivery_that_runs_unguarded_is_counted_with_its_cause() {
    let counted = unguarded_after(async || {
        let store = Arc::new(Broken {
            hangs: false,
            calls: AtomicU32::new(0),
        });
        let (stack, runs) = counting(IdempotencyLayer::new(store), Duration::ZERO, ack);
        for _ in 0..2 {
            let answer = stack
                .clone()
                .oneshot(JobRequest::new((), ctx(Uuid::new_v4())));
            assert_eq!(answer.await.unwrap(), Disposition::Ack);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    });
    assert_eq!(counted, vec![("unavailable".to_owned(), 2)]);
}

/// A store that answers, but refuses to write: every `set` is refused.
#[derive(Debug, Default)]
struct RefusesWrites(MemoryStore);

impl Store for RefusesWrites {
    fn insert<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        self.0.insert(key, value, ttl)
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.0.get(key)
    }

    fn set<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        futures::future::ready(Err(StoreError::refused("OOM command not allowed"))).boxed()
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.extend(key, value, ttl)
    }

    fn remove<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.remove(key, value)
    }
}

#[test]
fn a_record_the_store_refuses_is_counted_as_a_refusal() {
    let counted = unguarded_after(async || {
        let (stack, runs) = counting(
            IdempotencyLayer::new(RefusesWrites::default()),
            Duration::ZERO,
            ack,
        );
        let id = Uuid::new_v4();
        for _ in 0..2 {
            let answer = stack.clone().oneshot(JobRequest::new((), ctx(id)));
            assert_eq!(answer.await.unwrap(), Disposition::Ack);
        }
        // Nothing was recorded, so the copy ran too.
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    });
    assert_eq!(counted, vec![("refused".to_owned(), 2)]);
}
