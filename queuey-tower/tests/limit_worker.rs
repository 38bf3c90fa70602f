//! Per-key limits end to end: a worker on the memory backend, the limit
//! layer given with its handler, on tokio's paused clock. Waiting for a
//! limit spends no attempt and loses no job.

#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::store::MemoryStore;
use queuey_core::{Disposition, Error, Job, JobContext, JobError, JobHandler, Queues};
use queuey_tower::limit::LimitLayer;
use queuey_tower::testing::TestRun;
use queuey_tower::{JobRequest, Worker};

use queuey_core::backend::Heartbeats;
use serde::{Deserialize, Serialize};
use support::{Task, TestQueues, producer, spawn, wait_until};

/// Jobs 0..10 are of one tenant, 10..12 of another.
fn tenant(request: &JobRequest<Task>) -> Option<String> {
    Some(
        if request.job().n < 10 {
            "acme"
        } else {
            "globex"
        }
        .to_owned(),
    )
}

/// Runs each job for two seconds; records every call's job, attempt and
/// how many of the first tenant's ran at once.
#[derive(Default)]
struct Export {
    running: AtomicU32,
    most: AtomicU32,
    calls: Mutex<Vec<(u32, u32)>>,
}

struct Exporter(Arc<Export>);

impl JobHandler for Exporter {
    type Job = Task;

    async fn handle(&self, job: Task, ctx: JobContext) -> Result<(), JobError> {
        let Exporter(this) = self;
        this.calls.lock().unwrap().push((job.n, ctx.attempt()));
        let acme = job.n < 10;
        if acme {
            let now = this.running.fetch_add(1, Ordering::SeqCst) + 1;
            this.most.fetch_max(now, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        if acme {
            this.running.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn jobs_waiting_for_their_limit_spend_no_attempt_and_all_finish() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    for n in 0..12 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    let export = Arc::new(Export::default());
    let limit = LimitLayer::new("export", MemoryStore::new(), tenant)
        .concurrency(2)
        .unwrap();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(Exporter(Arc::clone(&export)), limit)
        .build()
        .await
        .unwrap();
    let report = TestRun::new(worker).until_finished(12).run().await.unwrap();

    assert_eq!(report.acknowledged().count(), 12);
    assert!(report.deferred().count() > 0, "nothing waited for a slot");
    assert_eq!(report.retried().count(), 0);
    assert_eq!(report.dead_lettered().count(), 0);
    // At most two of the tenant's exports at once, each run once, on its
    // first attempt: a wait for a slot is not a failure.
    assert_eq!(export.most.load(Ordering::SeqCst), 2);
    let calls = export.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 12, "{calls:?}");
    assert!(calls.iter().all(|(_, attempt)| *attempt == 1), "{calls:?}");
    // Ten jobs of two seconds, two at a time: about ten seconds of work.
    assert!(report.elapsed() >= Duration::from_secs(10));
    assert!(
        report.elapsed() < Duration::from_secs(30),
        "{:?}",
        report.elapsed()
    );
    // Deferred jobs were settled as deferrals and came back.
    for settled in report.settlements() {
        assert_eq!(settled.attempt, 1, "{settled:?}");
        assert!(
            matches!(
                settled.disposition,
                Disposition::Ack | Disposition::Defer { .. }
            ),
            "{settled:?}"
        );
    }
    assert!(backend.dead_letters(TestQueues::Work.name()).is_empty());
}

/// An export that declares its limit: two of a tenant at once.
#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = TestQueues::Work, name = "export", limit(key = tenant, concurrency = 2))]
struct Export2 {
    tenant: String,
}

/// Runs each export for two seconds, counting how many of each tenant run at once.
#[derive(Default)]
struct Tally {
    running: Mutex<std::collections::HashMap<String, u32>>,
    most: AtomicU32,
    calls: AtomicU32,
}

struct Exporter2(Arc<Tally>);

impl JobHandler for Exporter2 {
    type Job = Export2;

    async fn handle(&self, job: Export2, ctx: JobContext) -> Result<(), JobError> {
        let Exporter2(tally) = self;
        assert_eq!(ctx.attempt(), 1, "a wait spent an attempt");
        tally.calls.fetch_add(1, Ordering::SeqCst);
        let now = {
            let mut running = tally.running.lock().unwrap();
            let n = running.entry(job.tenant.clone()).or_default();
            *n += 1;
            *n
        };
        tally.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(2)).await;
        *tally.running.lock().unwrap().get_mut(&job.tenant).unwrap() -= 1;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_worker_with_a_limit_store_applies_the_limits_a_job_type_declares() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    for n in 0..9 {
        let tenant = if n < 6 { "acme" } else { "globex" };
        producer
            .enqueue(&Export2 {
                tenant: tenant.into(),
            })
            .await
            .unwrap();
    }
    let tally = Arc::new(Tally::default());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(Exporter2(Arc::clone(&tally)))
        .limit_store(MemoryStore::new())
        .build()
        .await
        .unwrap();
    let report = TestRun::new(worker).until_finished(9).run().await.unwrap();

    assert_eq!(report.acknowledged().count(), 9);
    assert!(report.deferred().count() > 0, "nothing waited for a slot");
    assert_eq!(report.retried().count(), 0);
    assert_eq!(tally.calls.load(Ordering::SeqCst), 9);
    // Never more than two of one tenant at once, though the worker has
    // room for many more.
    assert_eq!(tally.most.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_type_that_declares_limits_needs_a_limit_store() {
    let backend = Arc::new(MemoryBackend::new());
    let refused = Worker::<TestQueues, _>::builder(backend)
        .handler(Exporter2(Arc::default()))
        .build()
        .await
        .expect_err("a worker without a limit store is refused");
    let Error::InvalidConfig(message) = refused else {
        panic!("not a configuration error: {refused:?}");
    };
    assert!(message.contains("`export`"), "{message}");
    assert!(message.contains("limit_store"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn heartbeats_show_each_keys_slots_held_and_waits() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    for _ in 0..5 {
        let job = Export2 {
            tenant: "initech".into(),
        };
        producer.enqueue(&job).await.unwrap();
    }
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(Exporter2(Arc::default()))
        .limit_store(MemoryStore::new())
        .heartbeat_interval(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    // Two run (two seconds each), the other three were told to wait.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let workers = backend.workers().await.unwrap();
    let seen = workers[0]
        .limits
        .iter()
        .find(|seen| seen.key == "initech")
        .expect("the key is listed");
    assert_eq!(seen.name, "export");
    assert_eq!((seen.running, seen.concurrency), (2, Some(2)));
    assert_eq!(seen.rate, None);
    assert!(seen.waiting >= 1 && seen.waits >= 3, "{seen:?}");

    // Once every job ran, the key holds no slot.
    wait_until(|| running.handle.jobs_finished() == 5).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let workers = backend.workers().await.unwrap();
    let seen = workers[0].limits.iter().find(|seen| seen.key == "initech");
    assert_eq!(seen.map(|seen| seen.running), Some(0));
    running.stop().await;
}

/// A call to a partner API that allows four calls a second per host.
#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = TestQueues::Work, name = "call", limit(key = host, rate = "4/s"))]
struct Call {
    host: String,
}

/// Records when each host's calls started.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<std::collections::HashMap<String, Vec<tokio::time::Instant>>>>);

impl JobHandler for Starts {
    type Job = Call;

    async fn handle(&self, job: Call, _: JobContext) -> Result<(), JobError> {
        let now = tokio::time::Instant::now();
        self.0
            .lock()
            .unwrap()
            .entry(job.host)
            .or_default()
            .push(now);
        Ok(())
    }
}

/// Enqueues 20 calls to one host and 8 to another at once, through a
/// producer that books their turns in `booking` (or books none), and runs
/// them on a worker keeping limits in `store`: the report, and when each
/// host's calls started, counted from the enqueue.
async fn calls(
    store: Arc<MemoryStore>,
    booking: bool,
) -> (queuey_tower::testing::Report, Vec<Vec<Duration>>) {
    let backend = Arc::new(MemoryBackend::new());
    let mut builder = queuey_core::Producer::<TestQueues, _>::builder(backend.clone());
    if booking {
        builder = builder.limit_store(Arc::clone(&store));
    }
    let producer = builder.build().await.unwrap();
    let enqueued = tokio::time::Instant::now();
    for (host, calls) in [("a.example", 20), ("b.example", 8)] {
        for _ in 0..calls {
            producer.enqueue(&Call { host: host.into() }).await.unwrap();
        }
    }
    let starts = Starts::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(starts.clone())
        .limit_store(store)
        .build()
        .await
        .unwrap();
    let report = TestRun::new(worker).until_finished(28).run().await.unwrap();
    assert_eq!(report.acknowledged().count(), 28);
    assert_eq!(report.retried().count(), 0);
    assert!(backend.dead_letters(TestQueues::Work.name()).is_empty());
    let starts = starts.0.lock().unwrap();
    let since =
        |host: &str| -> Vec<Duration> { starts[host].iter().map(|at| *at - enqueued).collect() };
    (report, vec![since("a.example"), since("b.example")])
}

#[tokio::test(start_paused = true)]
async fn a_producer_that_books_turns_sends_each_limited_job_once_to_arrive_at_its_turn() {
    let (report, hosts) = calls(Arc::new(MemoryStore::new()), true).await;
    // Each job was delivered once, when it could start: no job waited at
    // the worker.
    assert_eq!(report.settlements().len(), 28);
    assert_eq!(report.deferred().count(), 0);
    for starts in hosts {
        // The n-th call of a host starts n turns (n × 250 ms) after the
        // enqueue, never before, and on time (the clock is tokio's).
        for (n, started) in starts.iter().enumerate() {
            let turn = Duration::from_millis(250) * n as u32;
            assert!(*started >= turn, "call {n} started at {started:?}");
            assert!(
                *started < turn + Duration::from_millis(50),
                "call {n} started at {started:?}"
            );
        }
    }

    // Without booking, the worker paces them the same, but each call past
    // a host's first is delivered, parked until its turn and delivered
    // again.
    let (report, hosts) = calls(Arc::new(MemoryStore::new()), false).await;
    assert_eq!(report.deferred().count(), 19 + 7);
    assert_eq!(report.settlements().len(), 28 + 19 + 7);
    for starts in hosts {
        for (n, started) in starts.iter().enumerate() {
            assert!(*started >= Duration::from_millis(250) * n as u32);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_producer_whose_limit_store_fails_enqueues_at_once_and_the_worker_paces() {
    for broken in [support::Broken::Down, support::Broken::Silent] {
        let backend = Arc::new(MemoryBackend::new());
        let producer = queuey_core::Producer::<TestQueues, _>::builder(backend.clone())
            .limit_store(broken)
            .store_timeout(Duration::from_millis(100))
            .build()
            .await
            .unwrap();
        for _ in 0..3 {
            producer
                .enqueue(&Call {
                    host: "a.example".into(),
                })
                .await
                .expect("an unbooked job is still enqueued");
        }
        // Unbooked, they go at once; the worker's limit spaces them.
        assert_eq!(backend.ready_count(TestQueues::Work.name()), 3);
        assert_eq!(backend.held_count(TestQueues::Work.name()), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_batch_sends_the_jobs_due_now_together_and_holds_the_others_until_their_turns() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = queuey_core::Producer::<TestQueues, _>::builder(backend.clone())
        .limit_store(MemoryStore::new())
        .build()
        .await
        .unwrap();
    let jobs: Vec<Call> = ["a", "a", "b", "a", "b"]
        .into_iter()
        .map(|host| Call { host: host.into() })
        .collect();
    let outcomes = producer.enqueue_batch(&jobs).await;
    assert_eq!(outcomes.len(), 5);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    // The first of each host is due now; the rest wait for their turns.
    assert_eq!(backend.ready_count(TestQueues::Work.name()), 2);
    assert_eq!(backend.held_count(TestQueues::Work.name()), 3);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(backend.ready_count(TestQueues::Work.name()), 4);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(backend.ready_count(TestQueues::Work.name()), 5);
}
