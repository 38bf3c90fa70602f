//! Queue sets, jobs and helpers shared by the queuey-tower tests.

#![allow(dead_code)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::backend::{Backend, Capabilities, DeliveryStream};
use queuey_core::memory::MemoryBackend;
use queuey_core::store::{Inserted, LimitStore, LimitUsage, Rate, Slot, Store, StoreError, Turn};

use queuey_core::{Envelope, Error, Job, JobContext, QueueConfig, Queues, Uuid};
use queuey_tower::JobRequest;
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "t")]
pub(crate) enum TestQueues {
    #[queue(
        prefetch = 64,
        retry(max_attempts = 3, backoff = "fixed", delay = "1s")
    )]
    Work,
    #[queue(prefetch = 1)]
    Single,
    #[queue(prefetch = 16)]
    Mixed,
}

/// A job on `t.work` (fixed 1 s backoff, three attempts).
#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(queue = TestQueues::Work, name = "task")]
pub(crate) struct Task {
    pub(crate) n: u32,
}

/// A job on `t.single` (prefetch 1), default policy.
#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(queue = TestQueues::Single, name = "single")]
pub(crate) struct Single {
    pub(crate) n: u32,
}

/// Two job types sharing `t.mixed`; `Other` has a policy of its own.
#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(queue = TestQueues::Mixed, name = "mixed_a")]
pub(crate) struct MixedA {
    pub(crate) n: u32,
}

#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(
    queue = TestQueues::Mixed,
    name = "mixed_b",
    retry(max_attempts = 2, backoff = "fixed", delay = "5s")
)]
pub(crate) struct MixedB {
    pub(crate) n: u32,
}

/// A request for layer tests.
pub(crate) fn request<J>(job: J) -> JobRequest<J> {
    JobRequest::new(job, JobContext::new(Uuid::new_v4(), "t.work"))
}

/// Waits (in paused time, this is instant) until `done` holds, failing the
/// test after an hour of virtual time.
pub(crate) async fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within an hour"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A producer of the test queue set (which it declares) on `backend`.
pub(crate) async fn producer<B: queuey_core::backend::Backend>(
    backend: B,
) -> queuey_core::Producer<TestQueues, B> {
    queuey_core::Producer::new(backend)
        .await
        .expect("the queue set is declared")
}

/// A worker running on a task of its own.
pub(crate) struct Running {
    pub(crate) handle: queuey_tower::WorkerHandle,
    pub(crate) task: tokio::task::JoinHandle<Result<(), queuey_tower::WorkerError>>,
}

/// Starts `worker` on a task.
pub(crate) fn spawn<Q: queuey_core::Queues, B: queuey_core::backend::Backend>(
    worker: queuey_tower::Worker<Q, B>,
) -> Running {
    Running {
        handle: worker.handle(),
        task: tokio::spawn(worker.run()),
    }
}

impl Running {
    /// Shuts the worker down and checks that `run` returned `Ok`.
    pub(crate) async fn stop(self) {
        self.handle.shutdown();
        bounded(self.task).await.unwrap().unwrap();
    }
}

/// Runs `future` to completion with a one-hour (virtual) bound.
pub(crate) async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(3600), future)
        .await
        .expect("did not finish within an hour")
}

/// Collects what a `tracing` subscriber writes.
#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Captures, on this thread until the guard drops, every line of
    /// `level` and above, without colours. Every call site is asked again,
    /// so one that a thread without a subscriber met first logs here too.
    pub(crate) fn on_this_thread(
        level: tracing::Level,
    ) -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(level)
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        tracing::callsite::rebuild_interest_cache();
        (captured, guard)
    }

    /// What was written so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A store that fails: every call is refused, as a store whose server is
/// gone does ([`Broken::Down`]), or never answered ([`Broken::Silent`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Broken {
    Down,
    Silent,
}

impl Broken {
    fn answer<'a, T: Send + 'a>(self) -> BoxFuture<'a, Result<T, StoreError>> {
        match self {
            Broken::Down => {
                futures::future::ready(Err(StoreError::unavailable("connection refused"))).boxed()
            }
            Broken::Silent => futures::future::pending().boxed(),
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

impl LimitStore for Broken {
    fn take_slot<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: u32,
        _: Duration,
    ) -> BoxFuture<'a, Result<Slot, StoreError>> {
        self.answer()
    }

    fn renew_slot<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.answer()
    }

    fn free_slot<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.answer()
    }

    fn reserve_turn<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Rate,
    ) -> BoxFuture<'a, Result<Turn, StoreError>> {
        self.answer()
    }

    fn book_turn<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Rate,
    ) -> BoxFuture<'a, Result<Duration, StoreError>> {
        self.answer()
    }

    fn limit_usage<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<LimitUsage, StoreError>> {
        self.answer()
    }
}

/// The memory backend, with a broker's consumer timeout: it reports
/// `consumer_timeout` for every queue, as the RabbitMQ backend does (and
/// never enforces it).
#[derive(Debug, Clone)]
pub(crate) struct WithConsumerTimeout {
    pub(crate) inner: Arc<MemoryBackend>,
    pub(crate) consumer_timeout: Duration,
}

impl WithConsumerTimeout {
    pub(crate) fn new(consumer_timeout: Duration) -> Self {
        WithConsumerTimeout {
            inner: Arc::new(MemoryBackend::new()),
            consumer_timeout,
        }
    }
}

impl Backend for WithConsumerTimeout {
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.declare(queues)
    }

    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.publish(envelope)
    }

    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.publish_after(envelope, delay)
    }

    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.defer(envelope, delay)
    }

    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>> {
        self.inner.consume(queue)
    }

    fn consumer_timeout(&self, _queue: &QueueConfig) -> Option<Duration> {
        Some(self.consumer_timeout)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
    }
}
