//! Unique jobs on the memory backend and an in-process store: one job of a
//! key at a time, the key back when the job is done for good or its window
//! passes, and a store that fails never stopping an enqueue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use queuey::job::Unique;
use queuey::prelude::*;
use queuey::store::{Inserted, MemoryStore, Store, StoreError};
use queuey::{EnqueueOptions, Error};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "unique-test")]
enum AppQueues {
    #[queue(retry(max_attempts = 2, backoff = "fixed", delay = "10s"))]
    Work,
}

/// Unique by its whole payload for a minute.
#[derive(Job, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[job(queue = AppQueues::Work, unique(window = "1m"))]
struct RebuildIndex {
    tenant: u32,
}

/// Unique by tenant, whatever the reason.
#[derive(Job, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[job(queue = AppQueues::Work, unique(window = "1m", key = Self::tenant_key))]
struct Recount {
    tenant: u32,
    reason: String,
}

impl Recount {
    fn tenant_key(&self) -> String {
        format!("tenant-{}", self.tenant)
    }
}

/// Not unique unless an enqueue says so.
#[derive(Job, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[job(queue = AppQueues::Work)]
struct Ping {
    n: u32,
}

const WORK: &str = "unique-test.work";
const MINUTE: Duration = Duration::from_secs(60);

async fn producer(
    backend: &Arc<MemoryBackend>,
    store: &MemoryStore,
) -> Producer<AppQueues, Arc<MemoryBackend>> {
    Producer::builder(Arc::clone(backend))
        .store(store.clone())
        .build()
        .await
        .unwrap()
}

fn duplicate_of(result: Result<queuey::job::Uuid, Error>) -> queuey::job::Uuid {
    match result {
        Err(Error::Duplicate { existing_id }) => existing_id,
        other => panic!("expected a duplicate, got {other:?}"),
    }
}

/// A running worker of `RebuildIndex` jobs answering with `answer`,
/// giving keys back to `store` if one is given; counts the runs.
struct Running {
    handle: queuey::worker::WorkerHandle,
    task: tokio::task::JoinHandle<Result<(), queuey::worker::WorkerError>>,
    runs: Arc<AtomicU32>,
}

async fn start_worker(
    backend: &Arc<MemoryBackend>,
    store: Option<&MemoryStore>,
    answer: fn(&RebuildIndex, &JobContext) -> Result<(), JobError>,
) -> Running {
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let builder = Worker::<AppQueues, _>::builder(Arc::clone(backend));
    let builder = match store {
        Some(store) => builder.store(store.clone()),
        None => builder,
    };
    let worker = builder
        .handler(handler_fn(move |job: RebuildIndex, ctx: JobContext| {
            counted.fetch_add(1, Ordering::SeqCst);
            let answer = answer(&job, &ctx);
            async move { answer }
        }))
        .build()
        .await
        .unwrap();
    Running {
        handle: worker.handle(),
        task: tokio::spawn(worker.run()),
        runs,
    }
}

impl Running {
    async fn finished(&self, jobs: u64) {
        while self.handle.jobs_finished() < jobs {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) {
        self.handle.shutdown();
        self.task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_enqueues_of_one_key_at_once_publish_one_job() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = Arc::new(producer(&backend, &store).await);
    let tries = (0..16).map(|_| {
        let producer = Arc::clone(&producer);
        tokio::spawn(async move { producer.enqueue(&RebuildIndex { tenant: 7 }).await })
    });
    let outcomes: Vec<_> = futures::future::join_all(tries)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let published: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(published.len(), 1, "{outcomes:?}");
    for outcome in outcomes.iter().filter(|o| o.is_err()) {
        assert!(
            matches!(outcome, Err(Error::Duplicate { existing_id }) if existing_id == published[0]),
            "{outcome:?}"
        );
    }
    assert_eq!(backend.ready_count(WORK), 1);
    // Another payload is another key.
    producer.enqueue(&RebuildIndex { tenant: 8 }).await.unwrap();
    assert_eq!(backend.ready_count(WORK), 2);
}

#[tokio::test(start_paused = true)]
async fn a_key_is_free_again_once_its_window_passes() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let first = producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
    tokio::time::advance(MINUTE - Duration::from_millis(1)).await;
    assert_eq!(
        duplicate_of(producer.enqueue(&RebuildIndex { tenant: 7 }).await),
        first
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    let second = producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
    assert_ne!(first, second);
    assert_eq!(backend.ready_count(WORK), 2);
}

#[tokio::test(start_paused = true)]
async fn a_key_function_and_per_enqueue_uniqueness() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let first = producer
        .enqueue(&Recount {
            tenant: 1,
            reason: "import".into(),
        })
        .await
        .unwrap();
    let again = producer
        .enqueue(&Recount {
            tenant: 1,
            reason: "manual".into(),
        })
        .await;
    assert_eq!(duplicate_of(again), first);
    producer
        .enqueue(&Recount {
            tenant: 2,
            reason: "manual".into(),
        })
        .await
        .unwrap();

    // A job type with no uniqueness of its own, made unique per enqueue.
    let once = EnqueueOptions::default().unique(Unique::key("nightly", MINUTE));
    let ping = producer
        .enqueue_with(&Ping { n: 1 }, once.clone())
        .await
        .unwrap();
    let other = producer.enqueue_with(&Ping { n: 2 }, once).await;
    assert_eq!(duplicate_of(other), ping);
    // ...and without the option it is enqueued every time.
    producer.enqueue(&Ping { n: 1 }).await.unwrap();
    producer.enqueue(&Ping { n: 1 }).await.unwrap();
    assert_eq!(backend.ready_count(WORK), 5);
}

#[tokio::test(start_paused = true)]
async fn the_same_job_enqueued_again_under_its_own_id_is_not_a_duplicate() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let id = queuey::job::Uuid::new_v4();
    let options = EnqueueOptions::default().job_id(id);
    let job = RebuildIndex { tenant: 3 };
    assert_eq!(
        producer.enqueue_with(&job, options.clone()).await.unwrap(),
        id
    );
    // What a caller does after an enqueue whose outcome it does not know.
    assert_eq!(producer.enqueue_with(&job, options).await.unwrap(), id);
    assert_eq!(duplicate_of(producer.enqueue(&job).await), id);
}

#[tokio::test(start_paused = true)]
async fn the_worker_gives_the_key_back_when_the_job_is_done_or_dead() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let worker = start_worker(&backend, Some(&store), |job, _| match job.tenant {
        13 => Err(JobError::fatal("tenant 13 is gone")),
        _ => Ok(()),
    })
    .await;
    for tenant in [7, 13] {
        producer.enqueue(&RebuildIndex { tenant }).await.unwrap();
    }
    worker.finished(2).await;
    assert_eq!(backend.dead_letters(WORK).len(), 1);
    // Both keys are free long before their window passes.
    assert!(store.is_empty(), "{store:?}");
    for tenant in [7, 13] {
        producer.enqueue(&RebuildIndex { tenant }).await.unwrap();
    }
    worker.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_key_stays_held_through_a_retry() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let worker = start_worker(&backend, Some(&store), |_, ctx| match ctx.attempt() {
        1 => Err(JobError::retryable("not yet")),
        _ => Ok(()),
    })
    .await;
    let first = producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
    while worker.runs.load(Ordering::SeqCst) < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The job is held for its retry: still the one of its key.
    assert_eq!(
        duplicate_of(producer.enqueue(&RebuildIndex { tenant: 7 }).await),
        first
    );
    worker.finished(1).await;
    assert_eq!(worker.runs.load(Ordering::SeqCst), 2);
    assert!(store.is_empty());
    worker.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_the_store_on_the_worker_the_key_lasts_its_window() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let worker = start_worker(&backend, None, |_, _| Ok(())).await;
    let first = producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
    worker.finished(1).await;
    // As after a worker that died between running the job and giving the
    // key back: the key expires with its window.
    assert_eq!(
        duplicate_of(producer.enqueue(&RebuildIndex { tenant: 7 }).await),
        first
    );
    tokio::time::advance(MINUTE).await;
    producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
    worker.stop().await;
}

#[tokio::test]
async fn a_unique_job_without_a_store_is_refused_with_a_hint() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<AppQueues, _>::new(Arc::clone(&backend))
        .await
        .unwrap();
    let error = producer
        .enqueue(&RebuildIndex { tenant: 7 })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidConfig(_)), "{error}");
    assert!(error.to_string().contains(".store("), "{error}");
    assert_eq!(backend.ready_count(WORK), 0);
}

/// A store that fails every call, or never answers.
#[derive(Debug)]
struct Broken {
    hang: bool,
}

impl Broken {
    fn answer<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, Result<T, StoreError>> {
        let hang = self.hang;
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            Err(StoreError::unavailable("connection refused"))
        })
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
async fn a_store_that_fails_or_hangs_never_stops_an_enqueue() {
    for hang in [false, true] {
        let backend = Arc::new(MemoryBackend::new());
        let producer = Producer::<AppQueues, _>::builder(Arc::clone(&backend))
            .store(Broken { hang })
            .store_timeout(Duration::from_millis(200))
            .build()
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
        producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
        // Unchecked, so both went out; each waited at most the bound.
        assert_eq!(backend.ready_count(WORK), 2);
        assert!(started.elapsed() <= Duration::from_millis(400));
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_that_surely_did_not_reach_the_broker_gives_its_key_back() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    // A deferral longer than the longest wait is refused before anything
    // is sent.
    let refused = producer
        .defer(
            &RebuildIndex { tenant: 7 },
            Duration::from_secs(400 * 86_400),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(!matches!(refused, Err(Error::Duplicate { .. })));
    assert!(store.is_empty(), "the refused job still holds its key");
    producer.enqueue(&RebuildIndex { tenant: 7 }).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_batch_checks_each_unique_job() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let jobs = [
        RebuildIndex { tenant: 1 },
        RebuildIndex { tenant: 2 },
        RebuildIndex { tenant: 1 },
    ];
    let outcomes = producer.enqueue_batch(&jobs).await;
    let first = *outcomes[0].as_ref().unwrap();
    assert!(outcomes[1].is_ok());
    assert!(matches!(outcomes[2], Err(Error::Duplicate { existing_id }) if existing_id == first));
    assert_eq!(backend.ready_count(WORK), 2);
}

#[tokio::test(start_paused = true)]
async fn a_window_of_zero_or_over_a_year_is_refused_at_enqueue() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    for window in [Duration::ZERO, Duration::MAX] {
        let options = EnqueueOptions::default().unique(Unique::payload(window));
        let error = producer
            .enqueue_with(&Ping { n: 1 }, options)
            .await
            .unwrap_err();
        assert!(matches!(error, Error::InvalidConfig(_)), "{error}");
        assert!(error.to_string().contains("365 days"), "{error}");
    }
    assert_eq!(backend.ready_count(WORK), 0);
    assert!(store.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_caller_key_never_collides_with_a_payload_key() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    let job = RebuildIndex { tenant: 7 };
    producer.enqueue(&job).await.unwrap();
    // The digest the payload key ends with, given as a caller's key.
    let payload = serde_json::to_string(&job).unwrap();
    let digest = queuey::job::Uuid::new_v5(&queuey::job::Uuid::NAMESPACE_OID, payload.as_bytes());
    let forged = Unique::key(format!("payload:{}", digest.simple()), MINUTE);
    let options = EnqueueOptions::default().unique(forged);
    producer.enqueue_with(&job, options).await.unwrap();
    assert_eq!(backend.ready_count(WORK), 2);
}

#[tokio::test(start_paused = true)]
async fn a_message_naming_another_jobs_key_does_not_give_it_back() {
    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = producer(&backend, &store).await;
    // A `Recount` of tenant 1 holds its key, as its producer claimed it.
    let holder = queuey::job::Uuid::new_v4();
    let other_key = "queuey:unique:unique-test.work:Recount:caller:tenant-1";
    store
        .insert(other_key, &holder.to_string(), MINUTE)
        .await
        .unwrap();
    // A message of another job type, under the holder's id, naming that key.
    let payload = serde_json::value::to_raw_value(&RebuildIndex { tenant: 2 }).unwrap();
    let mut forged = queuey::job::Envelope::new("RebuildIndex", WORK, payload);
    forged.job_id = holder;
    forged.unique_key = Some(other_key.to_owned());
    use queuey::backend::Backend;
    backend.publish(&forged).await.unwrap();
    let worker = start_worker(&backend, Some(&store), |_, _| Ok(())).await;
    worker.finished(1).await;
    worker.stop().await;
    assert_eq!(
        store.get(other_key).await.unwrap(),
        Some(holder.to_string()),
        "the other job's key stays claimed"
    );
    let again = producer
        .enqueue(&Recount {
            tenant: 1,
            reason: "manual".into(),
        })
        .await;
    assert_eq!(duplicate_of(again), holder);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn logs_name_a_key_by_its_digest_only() {
    let captured = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let writer = Arc::clone(&captured);
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || Captured(Arc::clone(&writer)))
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();

    // A store that fails: the enqueue goes unchecked, with a warning.
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<AppQueues, _>::builder(Arc::clone(&backend))
        .store(Broken { hang: false })
        .build()
        .await
        .unwrap();
    let job = Recount {
        tenant: 424_242,
        reason: "import".into(),
    };
    producer.enqueue(&job).await.unwrap();
    // A worker asked to give back a key the job does not compute to.
    let store = MemoryStore::new();
    let payload = serde_json::value::to_raw_value(&RebuildIndex { tenant: 3 }).unwrap();
    let mut forged = queuey::job::Envelope::new("RebuildIndex", WORK, payload);
    forged.unique_key = Some("queuey:unique:unique-test.work:Recount:caller:tenant-515151".into());
    use queuey::backend::Backend;
    backend.publish(&forged).await.unwrap();
    let worker = start_worker(&backend, Some(&store), |_, _| Ok(())).await;
    worker.finished(2).await;
    worker.stop().await;

    let text = String::from_utf8(captured.lock().unwrap().clone()).unwrap();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("queuey_core::unique"))
        .collect();
    assert!(
        warnings.iter().any(|l| l.contains("uniqueness check")),
        "{text}"
    );
    assert!(
        warnings.iter().any(|l| l.contains("does not compute to")),
        "{text}"
    );
    assert!(warnings.iter().all(|l| l.contains("key_digest=")), "{text}");
    assert!(!text.contains("424242"), "a key in clear: {text}");
    assert!(!text.contains("515151"), "a key in clear: {text}");
}

/// A log writer into shared bytes.
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
