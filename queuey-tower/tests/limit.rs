//! Per-key limits shared by a fleet: the layer around a probe handler, on
//! tokio's paused clock, with "workers" that share a memory store and a
//! "broker" that parks each deferred job for its delay, never less.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use queuey_core::store::{LimitStore, LimitUsage, MemoryStore, Rate, Slot};
use queuey_core::{BoxError, Disposition, JobContext, Uuid};
use queuey_tower::JobRequest;
use queuey_tower::limit::{
    DEFAULT_LEASE, LEASES_LOST_TOTAL, LimitLayer, OnStoreError, UNCHECKED_TOTAL, WAITS_TOTAL,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

#[path = "support/mod.rs"]
mod support;
use support::Broken;

const QUEUE: &str = "t.work";
const SECOND: Duration = Duration::from_secs(1);

/// A job calling an API on `host`; an empty host is a job with no key.
#[derive(Debug, Clone)]
struct Call {
    host: String,
}

/// The key function, as a type.
type KeyFn = fn(&JobRequest<Call>) -> Option<String>;

/// The layer under test.
type Limited = LimitLayer<KeyFn>;

fn host(request: &JobRequest<Call>) -> Option<String> {
    let host = &request.job().host;
    (!host.is_empty()).then(|| host.clone())
}

/// What the handler saw: how many ran at once, at most, and who started
/// when.
#[derive(Debug, Default)]
struct Probe {
    running: AtomicU32,
    most: AtomicU32,
    starts: Mutex<Vec<(Uuid, Instant)>>,
}

impl Probe {
    fn most(&self) -> u32 {
        self.most.load(Ordering::SeqCst)
    }

    fn starts(&self) -> Vec<(Uuid, Instant)> {
        self.starts.lock().unwrap().clone()
    }
}

/// A "worker": the layer around a handler that runs for `hold` (or until
/// `release` is notified, when given).
fn worker(
    layer: Limited,
    probe: &Arc<Probe>,
    hold: Duration,
    release: Option<Arc<Notify>>,
) -> impl Service<JobRequest<Call>, Response = Disposition, Error = BoxError, Future: Send>
+ Clone
+ Send
+ 'static {
    let probe = Arc::clone(probe);
    ServiceBuilder::new()
        .layer(layer)
        .service(service_fn(move |request: JobRequest<Call>| {
            let probe = Arc::clone(&probe);
            let release = release.clone();
            async move {
                let now = probe.running.fetch_add(1, Ordering::SeqCst) + 1;
                probe.most.fetch_max(now, Ordering::SeqCst);
                probe
                    .starts
                    .lock()
                    .unwrap()
                    .push((request.ctx().job_id(), Instant::now()));
                match release {
                    Some(release) => release.notified().await,
                    None => tokio::time::sleep(hold).await,
                }
                probe.running.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, BoxError>(Disposition::Ack)
            }
        }))
}

fn layer(store: &MemoryStore) -> Limited {
    LimitLayer::new("api", store.clone(), host as KeyFn)
}

fn request(id: Uuid, host: &str, deferrals: u32) -> JobRequest<Call> {
    JobRequest::new(
        Call { host: host.into() },
        JobContext::new(id, QUEUE).with_deferrals(deferrals),
    )
}

/// One job through `stack` as the broker carries it: each deferral parks
/// it for its delay and delivers it again with one more deferral. Answers
/// the final disposition and the deferrals it took.
async fn deliver<S>(mut stack: S, id: Uuid, host: &str) -> (Disposition, Vec<Duration>)
where
    S: Service<JobRequest<Call>, Response = Disposition, Error = BoxError>,
{
    let mut waits = Vec::new();
    loop {
        let deferrals = u32::try_from(waits.len()).unwrap();
        let answer = stack
            .ready()
            .await
            .unwrap()
            .call(request(id, host, deferrals))
            .await
            .unwrap();
        match answer {
            Disposition::Defer { delay } => {
                assert!(delay > Duration::ZERO, "a wait is never zero");
                waits.push(delay);
                tokio::time::sleep(delay).await;
            }
            other => return (other, waits),
        }
    }
}

async fn usage(store: &MemoryStore, host: &str) -> LimitUsage {
    store
        .limit_usage(&format!("limit:api:{host}"))
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn two_workers_sharing_a_store_run_at_most_k_jobs_of_a_key_at_once() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    // Two workers, one store: the limit is theirs together.
    let one = worker(
        layer(&store).concurrency(3).unwrap(),
        &probe,
        2 * SECOND,
        None,
    );
    let two = worker(
        layer(&store).concurrency(3).unwrap(),
        &probe,
        2 * SECOND,
        None,
    );
    let jobs: Vec<_> = (0..20)
        .map(|n| {
            let id = Uuid::new_v4();
            let stack = if n % 2 == 0 {
                one.clone().boxed_clone()
            } else {
                two.clone().boxed_clone()
            };
            tokio::spawn(async move { deliver(stack, id, "api.example").await })
        })
        .collect();
    let mut deferrals = 0;
    for job in jobs {
        let (answer, waits) = job.await.unwrap();
        assert_eq!(answer, Disposition::Ack);
        deferrals += waits.len();
    }
    assert_eq!(probe.most(), 3, "three at once, never more");
    // The handler ran once per job: never for a deferred delivery.
    assert_eq!(probe.starts().len(), 20);
    // 20 jobs of 2 s, 3 at a time: about 14 s of work. Paced waits bring
    // each job back about when a slot frees, not over and over.
    assert!(deferrals <= 3 * 20, "{deferrals} deferrals for 20 jobs");
    let usage = usage(&store, "api.example").await;
    assert_eq!(usage.running, 0);
    assert_eq!(usage.typical_hold, Some(2 * SECOND));
}

#[tokio::test(start_paused = true)]
async fn jobs_refused_together_come_back_spread_in_step_with_the_holds() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let stack = worker(
        layer(&store).concurrency(2).unwrap(),
        &probe,
        10 * SECOND,
        None,
    );
    // Two jobs hold the slots for 10 s; the key's typical hold is 10 s.
    for _ in 0..2 {
        stack
            .clone()
            .oneshot(request(Uuid::new_v4(), "api.example", 0))
            .await
            .unwrap();
    }
    let holders: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(
                stack
                    .clone()
                    .oneshot(request(Uuid::new_v4(), "api.example", 0)),
            )
        })
        .collect();
    tokio::task::yield_now().await;
    // Ten more arrive at once and are refused.
    let mut waits = Vec::new();
    for _ in 0..10 {
        let answer = stack
            .clone()
            .oneshot(request(Uuid::new_v4(), "api.example", 0))
            .await
            .unwrap();
        let Disposition::Defer { delay } = answer else {
            panic!("a job was let in past the limit: {answer:?}");
        };
        waits.push(delay);
    }
    // The n-th refused waits about ceil(n / 2) holds, spread by half a
    // hold either way: never all at the same instant, never before a slot
    // could free.
    for (n, wait) in waits.iter().enumerate() {
        let rounds = u32::try_from(n + 1).unwrap().div_ceil(2);
        let base = 10 * SECOND * rounds;
        assert!(*wait >= base / 2 && *wait <= base * 3 / 2, "{n}: {wait:?}");
    }
    let mut distinct = waits.clone();
    distinct.sort();
    distinct.dedup();
    assert!(distinct.len() >= 8, "the waits are not spread: {waits:?}");
    for holder in holders {
        assert_eq!(holder.await.unwrap().unwrap(), Disposition::Ack);
    }
    assert_eq!(probe.starts().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_freed_slot_lets_the_next_job_start() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let release = Arc::new(Notify::new());
    let stack = worker(
        layer(&store).concurrency(1).unwrap(),
        &probe,
        SECOND,
        Some(Arc::clone(&release)),
    );
    let first = tokio::spawn(
        stack
            .clone()
            .oneshot(request(Uuid::new_v4(), "api.example", 0)),
    );
    while probe.starts().is_empty() {
        tokio::task::yield_now().await;
    }
    let next = Uuid::new_v4();
    let refused = stack
        .clone()
        .oneshot(request(next, "api.example", 0))
        .await
        .unwrap();
    assert!(matches!(refused, Disposition::Defer { .. }), "{refused:?}");
    assert_eq!(usage(&store, "api.example").await.waiting, 1);

    tokio::time::sleep(3 * SECOND).await;
    release.notify_one();
    assert_eq!(first.await.unwrap().unwrap(), Disposition::Ack);
    // The slot was freed before the first job answered, its hold recorded.
    let usage = usage(&store, "api.example").await;
    assert_eq!(usage.running, 0);
    assert_eq!(usage.typical_hold, Some(3 * SECOND));
    // The job refused comes back and runs.
    release.notify_one();
    let again = stack
        .oneshot(request(next, "api.example", 1))
        .await
        .unwrap();
    assert_eq!(again, Disposition::Ack);
    assert_eq!(probe.starts().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_slot_of_a_worker_that_died_comes_back_within_its_lease() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    // A worker took the key's only slot for a job, then was killed: it
    // never frees it nor renews it.
    let taken = store
        .take_slot("limit:api:api.example", "killed", 1, DEFAULT_LEASE)
        .await
        .unwrap();
    assert_eq!(taken, Slot::Taken);
    let start = Instant::now();
    let stack = worker(layer(&store).concurrency(1).unwrap(), &probe, SECOND, None);
    let (answer, waits) = deliver(stack, Uuid::new_v4(), "api.example").await;
    assert_eq!(answer, Disposition::Ack);
    assert!(!waits.is_empty());
    let started = probe.starts()[0].1 - start;
    assert!(started >= DEFAULT_LEASE, "started {started:?} in");
    // Waits of about a second (no hold time known yet): it starts soon
    // after the lease ends.
    assert!(
        started <= DEFAULT_LEASE + 2 * SECOND,
        "started {started:?} in"
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_copy_of_a_running_job_waits_for_the_first_instead_of_sharing_its_slot() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    // Two slots, so the copy finds one free: it must not take it.
    let stack = worker(
        layer(&store).concurrency(2).unwrap(),
        &probe,
        10 * SECOND,
        None,
    );
    let id = Uuid::new_v4();
    let first = tokio::spawn(stack.clone().oneshot(request(id, "api.example", 0)));
    while probe.starts().is_empty() {
        tokio::task::yield_now().await;
    }
    // The broker delivers the job's message again while it runs: the copy
    // waits, at most until the first copy's slot could run out.
    let copy = stack
        .clone()
        .oneshot(request(id, "api.example", 0))
        .await
        .unwrap();
    let Disposition::Defer { delay } = copy else {
        panic!("the copy was not deferred: {copy:?}");
    };
    assert!(
        delay > Duration::ZERO && delay <= DEFAULT_LEASE,
        "{delay:?}"
    );
    // Another job of the key takes the second slot, beside the first copy.
    let other = stack
        .clone()
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await
        .unwrap();
    assert_eq!(other, Disposition::Ack);
    assert_eq!(first.await.unwrap().unwrap(), Disposition::Ack);
    // Back after its wait, the copy runs on a slot of its own.
    tokio::time::sleep(delay).await;
    let again = stack.oneshot(request(id, "api.example", 1)).await.unwrap();
    assert_eq!(again, Disposition::Ack);
    let runs: Vec<Instant> = probe
        .starts()
        .into_iter()
        .filter(|(job, _)| *job == id)
        .map(|(_, at)| at)
        .collect();
    assert_eq!(runs.len(), 2);
    assert!(runs[1] - runs[0] >= 10 * SECOND, "the copies overlapped");
    assert_eq!(probe.most(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_dropped_while_running_frees_its_slot_at_once() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let stack = worker(
        layer(&store).concurrency(1).unwrap(),
        &probe,
        3_600 * SECOND,
        None,
    );
    // The job's future is dropped mid-run (a shutdown, an outer timeout).
    let dropped = tokio::time::timeout(
        SECOND,
        stack
            .clone()
            .oneshot(request(Uuid::new_v4(), "api.example", 0)),
    )
    .await;
    assert!(dropped.is_err());
    // Its slot is freed in the background, without waiting for the lease.
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(usage(&store, "api.example").await.running, 0);
    let next = tokio::time::timeout(
        SECOND,
        stack.oneshot(request(Uuid::new_v4(), "api.example", 0)),
    )
    .await;
    assert!(next.is_err(), "the next job ran (and is still running)");
    assert_eq!(probe.starts().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_running_job_keeps_its_slot_past_the_lease_and_a_lost_one_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);

    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let lease = 3 * SECOND;
    let stack = worker(
        layer(&store).concurrency(1).unwrap().lease(lease),
        &probe,
        20 * SECOND,
        None,
    );
    let long = Uuid::new_v4();
    let running = tokio::spawn(stack.clone().oneshot(request(long, "api.example", 0)));
    // Well past its lease, the job's slot is still its own: renewed.
    tokio::time::sleep(10 * SECOND).await;
    let refused = stack
        .clone()
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await
        .unwrap();
    assert!(matches!(refused, Disposition::Defer { .. }), "{refused:?}");
    assert_eq!(usage(&store, "api.example").await.running, 1);
    // The slot goes (as if the store had lost it): the next renewal finds
    // it gone, which is counted, and the job runs on.
    let holder = long.simple().to_string();
    assert!(
        store
            .free_slot("limit:api:api.example", &holder)
            .await
            .unwrap()
    );
    assert_eq!(running.await.unwrap().unwrap(), Disposition::Ack);
    assert_eq!(
        counter(&snapshotter, LEASES_LOST_TOTAL, &[("limit", "api")]),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn n_starts_per_period_never_early_each_job_parked_once() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let rate: Rate = "2/s".parse().unwrap();
    let one = worker(layer(&store).rate(rate), &probe, Duration::ZERO, None);
    let two = worker(layer(&store).rate(rate), &probe, Duration::ZERO, None);
    let start = Instant::now();
    let jobs: Vec<_> = (0..10)
        .map(|n| {
            let stack = if n % 2 == 0 {
                one.clone().boxed_clone()
            } else {
                two.clone().boxed_clone()
            };
            tokio::spawn(async move { deliver(stack, Uuid::new_v4(), "api.example").await })
        })
        .collect();
    for job in jobs {
        let (answer, waits) = job.await.unwrap();
        assert_eq!(answer, Disposition::Ack);
        // A job deferred for its turn runs when it comes back.
        assert!(waits.len() <= 1, "parked {} times", waits.len());
    }
    let mut starts: Vec<Duration> = probe.starts().iter().map(|s| s.1 - start).collect();
    starts.sort();
    assert_eq!(starts.len(), 10);
    for (n, at) in starts.iter().enumerate() {
        // The n-th start, never before n half-seconds.
        let due = Duration::from_millis(500) * u32::try_from(n).unwrap();
        assert!(*at >= due, "start {n} at {at:?}, due at {due:?}");
        assert!(*at < due + Duration::from_millis(50), "start {n} at {at:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_starts_at_once_and_the_rest_follow_at_the_rate() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let rate = "10/s".parse::<Rate>().unwrap().with_burst(5).unwrap();
    let stack = worker(layer(&store).rate(rate), &probe, Duration::ZERO, None);
    let start = Instant::now();
    let jobs: Vec<_> = (0..8)
        .map(|_| {
            let stack = stack.clone();
            tokio::spawn(async move { deliver(stack, Uuid::new_v4(), "api.example").await })
        })
        .collect();
    for job in jobs {
        assert_eq!(job.await.unwrap().0, Disposition::Ack);
    }
    let mut starts: Vec<Duration> = probe.starts().iter().map(|s| s.1 - start).collect();
    starts.sort();
    assert_eq!(&starts[..5], &[Duration::ZERO; 5]);
    for (n, at) in starts[5..].iter().enumerate() {
        let due = Duration::from_millis(100) * (u32::try_from(n).unwrap() + 1);
        assert!(*at >= due, "start {} at {at:?}, due at {due:?}", n + 5);
    }
}

#[tokio::test(start_paused = true)]
async fn jobs_back_late_after_an_outage_start_at_the_rate_not_together() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let rate: Rate = "2/s".parse().unwrap();
    let stack = worker(layer(&store).rate(rate), &probe, Duration::ZERO, None);
    let ids: Vec<Uuid> = (0..6).map(|_| Uuid::new_v4()).collect();
    // Each is told to wait for its turn (the first starts at once).
    for (n, id) in ids.iter().enumerate() {
        let answer = stack
            .clone()
            .oneshot(request(*id, "api.example", 0))
            .await
            .unwrap();
        if n == 0 {
            assert_eq!(answer, Disposition::Ack);
        } else {
            assert!(matches!(answer, Disposition::Defer { .. }), "{answer:?}");
        }
    }
    // The broker is away until every turn has passed; then all five come
    // back at once.
    tokio::time::advance(Duration::from_secs(10)).await;
    let back = Instant::now();
    let jobs: Vec<_> = ids[1..]
        .iter()
        .map(|&id| {
            let stack = stack.clone();
            tokio::spawn(async move {
                let mut stack = stack;
                let mut deferrals = 1;
                loop {
                    let answer = stack
                        .ready()
                        .await
                        .unwrap()
                        .call(request(id, "api.example", deferrals))
                        .await
                        .unwrap();
                    match answer {
                        Disposition::Defer { delay } => {
                            deferrals += 1;
                            tokio::time::sleep(delay).await;
                        }
                        other => return (other, deferrals - 1),
                    }
                }
            })
        })
        .collect();
    for job in jobs {
        let (answer, more) = job.await.unwrap();
        assert_eq!(answer, Disposition::Ack);
        assert!(more <= 1, "deferred {more} more times");
    }
    let mut starts: Vec<Duration> = probe.starts()[1..].iter().map(|s| s.1 - back).collect();
    starts.sort();
    // Half a second apart, as the rate allows, though all were due.
    for (n, at) in starts.iter().enumerate() {
        let due = Duration::from_millis(500) * u32::try_from(n).unwrap();
        assert!(*at >= due, "start {n} at {at:?}, due at {due:?}");
        assert!(*at < due + Duration::from_millis(50), "start {n} at {at:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_rate_and_a_concurrency_limit_hold_together() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let limit = layer(&store)
        .rate("5/s".parse().unwrap())
        .concurrency(2)
        .unwrap();
    let stack = worker(limit, &probe, 2 * SECOND, None);
    let start = Instant::now();
    let jobs: Vec<_> = (0..6)
        .map(|_| {
            let stack = stack.clone();
            tokio::spawn(async move { deliver(stack, Uuid::new_v4(), "api.example").await })
        })
        .collect();
    for job in jobs {
        assert_eq!(job.await.unwrap().0, Disposition::Ack);
    }
    assert_eq!(probe.most(), 2);
    let mut starts: Vec<Duration> = probe.starts().iter().map(|s| s.1 - start).collect();
    starts.sort();
    for pair in starts.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(200),
            "{starts:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn jobs_without_a_key_and_other_keys_run_freely() {
    let store = MemoryStore::new();
    let probe = Arc::new(Probe::default());
    let release = Arc::new(Notify::new());
    let stack = worker(
        layer(&store)
            .concurrency(1)
            .unwrap()
            .rate("1/h".parse().unwrap()),
        &probe,
        SECOND,
        Some(Arc::clone(&release)),
    );
    // The key's one slot and its one turn of the hour are taken ...
    let holder = tokio::spawn(stack.clone().oneshot(request(Uuid::new_v4(), "busy", 0)));
    while probe.starts().is_empty() {
        tokio::task::yield_now().await;
    }
    // ... yet jobs without a key run, several at once, and so does a job
    // of another key.
    let free: Vec<_> = ["", "", "other"]
        .into_iter()
        .map(|host| tokio::spawn(stack.clone().oneshot(request(Uuid::new_v4(), host, 0))))
        .collect();
    while probe.starts().len() < 4 {
        tokio::task::yield_now().await;
    }
    assert_eq!(probe.most(), 4);
    release.notify_waiters();
    for job in free {
        assert_eq!(job.await.unwrap().unwrap(), Disposition::Ack);
    }
    assert_eq!(holder.await.unwrap().unwrap(), Disposition::Ack);
    // Nothing was stored for the jobs without a key.
    assert_eq!(usage(&store, "").await, LimitUsage::default());
}

#[tokio::test(start_paused = true)]
async fn a_layer_without_limits_lets_every_job_through_without_the_store() {
    let probe = Arc::new(Probe::default());
    let stack = worker(
        LimitLayer::new("api", Broken::Down, host as KeyFn),
        &probe,
        SECOND,
        None,
    );
    let answer = stack
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await;
    assert_eq!(answer.unwrap(), Disposition::Ack);
}

fn failing() -> Limited {
    LimitLayer::new("api", Broken::Down, host as KeyFn)
        .concurrency(1)
        .unwrap()
        .rate("1/s".parse().unwrap())
}

/// The value of the counter `name` with exactly `labels`.
fn counter(snapshotter: &Snapshotter, name: &str, labels: &[(&str, &str)]) -> u64 {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            let mut found: Vec<_> = key.labels().map(|l| (l.key(), l.value())).collect();
            found.sort();
            let mut wanted = labels.to_vec();
            wanted.sort();
            key.name() == name && found == wanted
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

#[tokio::test(start_paused = true)]
async fn a_store_that_fails_defers_the_job_by_default_without_running_it() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);

    let probe = Arc::new(Probe::default());
    let stack = worker(failing(), &probe, SECOND, None);
    let answer = stack
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await
        .unwrap();
    let Disposition::Defer { delay } = answer else {
        panic!("failing closed runs nothing: {answer:?}");
    };
    // About the store pause (5 s), spread.
    assert!(
        delay >= 5 * SECOND / 2 && delay <= 15 * SECOND / 2,
        "{delay:?}"
    );
    assert!(probe.starts().is_empty());
    let waits = [("limit", "api"), ("wait", "store")];
    assert_eq!(counter(&snapshotter, WAITS_TOTAL, &waits), 1);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_fails_open_runs_the_job_and_counts_it() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);

    let probe = Arc::new(Probe::default());
    let stack = worker(
        failing().on_store_error(OnStoreError::FailOpen),
        &probe,
        SECOND,
        None,
    );
    let answer = stack
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await;
    assert_eq!(answer.unwrap(), Disposition::Ack);
    assert_eq!(probe.starts().len(), 1);
    let unchecked = [("limit", "api"), ("reason", "unavailable")];
    assert_eq!(counter(&snapshotter, UNCHECKED_TOTAL, &unchecked), 1);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_does_not_answer_is_bounded_by_the_store_timeout() {
    let probe = Arc::new(Probe::default());
    let limit = LimitLayer::new("api", Broken::Silent, host as KeyFn)
        .concurrency(1)
        .unwrap()
        .store_timeout(Duration::from_millis(200))
        .on_store_error(OnStoreError::FailOpen);
    let stack = worker(limit, &probe, SECOND, None);
    let start = Instant::now();
    let answer = stack
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await;
    assert_eq!(answer.unwrap(), Disposition::Ack);
    // 200 ms for the slot it could not take, then the job's second.
    assert_eq!(start.elapsed(), Duration::from_millis(200) + SECOND);
}

#[test]
fn a_concurrency_of_zero_is_refused_with_a_reason() {
    let error = layer(&MemoryStore::new()).concurrency(0).unwrap_err();
    assert!(error.to_string().contains("at least 1"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_cool_down_around_the_limit_does_not_take_a_limit_wait_for_the_apis() {
    use queuey_tower::cooldown::CooldownLayer;

    let store = MemoryStore::new();
    let limit = layer(&store).concurrency(1).unwrap();
    let release = Arc::new(Notify::new());
    let probe = Arc::new(Probe::default());
    let limited = worker(limit, &probe, SECOND, Some(Arc::clone(&release)));
    let mut stack = ServiceBuilder::new()
        .layer(CooldownLayer::new(host))
        .service(limited);

    // The first job holds the host's only slot; the second waits for it.
    let first = stack
        .ready()
        .await
        .unwrap()
        .call(request(Uuid::new_v4(), "api.example", 0));
    let first = tokio::spawn(first);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = stack
        .ready()
        .await
        .unwrap()
        .call(request(Uuid::new_v4(), "api.example", 0))
        .await
        .unwrap();
    assert!(matches!(second, Disposition::Defer { .. }), "{second:?}");
    release.notify_one();
    assert_eq!(first.await.unwrap().unwrap(), Disposition::Ack);

    // The wait was the limit's, not the API's: the host is not cooling
    // down, so the next job runs at once.
    let third = stack
        .ready()
        .await
        .unwrap()
        .call(request(Uuid::new_v4(), "api.example", 0));
    let third = tokio::spawn(third);
    tokio::time::sleep(Duration::from_millis(10)).await;
    release.notify_one();
    assert_eq!(third.await.unwrap().unwrap(), Disposition::Ack);
    assert_eq!(probe.starts().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn limits_that_fail_open_run_the_job_while_the_store_fails() {
    let limits = queuey_core::Limits::new()
        .with_concurrency(std::num::NonZeroU32::new(1).unwrap())
        .with_fail_open();
    let layer = LimitLayer::new("api", Broken::Down, host as KeyFn).limits(limits);
    let probe = Arc::new(Probe::default());
    let answer = worker(layer, &probe, SECOND, None)
        .oneshot(request(Uuid::new_v4(), "api.example", 0))
        .await;
    assert_eq!(answer.unwrap(), Disposition::Ack);
    assert_eq!(probe.starts().len(), 1);
}
