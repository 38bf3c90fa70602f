//! What every side measures with: the job it carries, the ledger of
//! instants per job, the closed and open loops that drive producers, and
//! the process's peak memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::side::{BoxError, Outcome, Row};

/// An instant per job slot, as nanoseconds since a base instant plus one;
/// 0 means not recorded yet.
#[derive(Debug)]
struct Instants {
    base: Instant,
    slots: Vec<AtomicU64>,
}

impl Instants {
    fn new(base: Instant, jobs: usize) -> Instants {
        Instants {
            base,
            slots: (0..jobs).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Now, in the slots' unit.
    fn now(&self) -> u64 {
        self.at(Instant::now())
    }

    /// `instant`, in the slots' unit.
    fn at(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.base).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
    }

    /// Records now at `index`, replacing what was there.
    fn set(&self, index: usize) {
        self.set_at(index, Instant::now());
    }

    /// Records `at` at `index`, replacing what was there.
    fn set_at(&self, index: usize, at: Instant) {
        if let Some(slot) = self.slots.get(index) {
            slot.store(self.at(at), Ordering::Release);
        }
    }

    /// Records now at `index` unless something is there; `true` if it did.
    fn set_once(&self, index: usize) -> bool {
        let Some(slot) = self.slots.get(index) else {
            return false;
        };
        slot.compare_exchange(0, self.now(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The recorded value at `index`, if any.
    fn get(&self, index: usize) -> Option<u64> {
        match self.slots.get(index)?.load(Ordering::Acquire) {
            0 => None,
            at => Some(at),
        }
    }
}

/// Wakes whoever waits for a count to reach its target.
#[derive(Debug)]
struct Target {
    count: AtomicUsize,
    target: usize,
    reached: Notify,
}

impl Target {
    fn new(target: usize) -> Target {
        Target {
            count: AtomicUsize::new(0),
            target,
            reached: Notify::new(),
        }
    }

    fn add(&self) {
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 >= self.target {
            self.reached.notify_waiters();
        }
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    async fn wait(&self) {
        loop {
            let notified = self.reached.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() >= self.target {
                return;
            }
            notified.await;
        }
    }
}

/// Instants per job index: when its enqueue was due (the open loop's
/// schedule), when its handler started.
#[derive(Debug)]
pub struct Ledger {
    offered: Instants,
    started: Instants,
    starts: Target,
}

impl Ledger {
    /// A ledger for job indices `0..jobs`.
    pub fn new(jobs: usize) -> Arc<Self> {
        let base = Instant::now();
        Arc::new(Ledger {
            offered: Instants::new(base, jobs),
            started: Instants::new(base, jobs),
            starts: Target::new(jobs),
        })
    }

    /// Records `due` as the instant the enqueue of job `index` was due: the
    /// open loop's schedule, not when the task got to run, so that a
    /// producer that falls behind shows in the latency instead of hiding
    /// it.
    fn offered(&self, index: usize, due: Instant) {
        self.offered.set_at(index, due);
    }

    /// Records now as the instant job `index`'s handler started, the first
    /// time only (a redelivered job keeps its first start).
    pub fn started(&self, index: usize) {
        if self.started.set_once(index) {
            self.starts.add();
        }
    }

    /// Jobs whose handler started so far.
    pub fn started_count(&self) -> usize {
        self.starts.count()
    }

    /// Resolves when every index has started.
    pub async fn all_started(&self) {
        self.starts.wait().await;
    }

    /// Per job with both instants, enqueue due → handler started in µs.
    pub fn latencies_us(&self) -> Vec<u64> {
        (0..self.offered.slots.len())
            .filter_map(|i| {
                let (offered, started) = (self.offered.get(i)?, self.started.get(i)?);
                Some(started.saturating_sub(offered) / 1_000)
            })
            .collect()
    }
}

/// Jobs completed, and when the last one did: the end of a throughput
/// row's measured part.
#[derive(Debug)]
pub struct Tally {
    base: Instant,
    last: AtomicU64,
    done: Target,
}

impl Tally {
    /// A tally waiting for `jobs` completions.
    pub fn new(jobs: usize) -> Arc<Self> {
        Arc::new(Tally {
            base: Instant::now(),
            last: AtomicU64::new(0),
            done: Target::new(jobs),
        })
    }

    /// Counts one completion, now.
    pub fn completed(&self) {
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(now, Ordering::AcqRel);
        self.done.add();
    }

    /// Completions so far.
    pub fn count(&self) -> usize {
        self.done.count()
    }

    /// Resolves when every job has completed.
    pub async fn all_done(&self) {
        self.done.wait().await;
    }

    /// Waits until every job has completed, or fails once `limit` has passed
    /// since `since` (the clock of the measured part) with how many did.
    pub async fn wait_done(&self, since: Instant, limit: Duration) -> Result<(), BoxError> {
        let deadline = tokio::time::Instant::from_std(since + limit);
        match tokio::time::timeout_at(deadline, self.all_done()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(format!(
                "{} of {} jobs completed in {limit:?}",
                self.count(),
                self.done.target
            )
            .into()),
        }
    }

    /// From `since` to the last completion (zero if none came after it).
    pub fn elapsed_since(&self, since: Instant) -> Duration {
        let last = self.base + Duration::from_nanos(self.last.load(Ordering::Acquire));
        last.saturating_duration_since(since)
    }
}

/// What a worker run of `row` measured, from its instruments: the jobs
/// completed since `started`, and the row's own figures (the Latency
/// row's latencies, the Retry row's lateness against `retry_delay`, the
/// Memory row's `peak_rss_kib`).
pub fn worker_outcome(
    row: Row,
    started: Instant,
    retry_delay: Duration,
    (tally, ledger, retries): (&Tally, &Ledger, &Retries),
    peak_rss_kib: Option<u64>,
) -> Outcome {
    let (lateness_us, early) = match row {
        Row::Retry => retries.lateness_us(retry_delay),
        _ => (Vec::new(), 0),
    };
    Outcome {
        jobs: tally.count() as u64,
        elapsed_secs: tally.elapsed_since(started).as_secs_f64(),
        latencies_us: match row {
            Row::Latency => ledger.latencies_us(),
            _ => Vec::new(),
        },
        lateness_us,
        early,
        peak_rss_kib: (row == Row::Memory).then_some(peak_rss_kib).flatten(),
    }
}

/// What a failing-once job records: when its first attempt failed and when
/// its second started.
#[derive(Debug)]
pub struct Retries {
    failed: Instants,
    restarted: Instants,
}

/// Which attempt a start of a job is, as [`Retries::start`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The first start: the handler fails it (and calls
    /// [`Retries::failed`] just before).
    First,
    /// A later start: the handler completes it.
    Again,
}

impl Retries {
    /// A record for job indices `0..jobs`.
    pub fn new(jobs: usize) -> Arc<Self> {
        let base = Instant::now();
        Arc::new(Retries {
            failed: Instants::new(base, jobs),
            restarted: Instants::new(base, jobs),
        })
    }

    /// Which attempt this start of job `index` is; a second start is
    /// recorded (the first of them only).
    pub fn start(&self, index: usize) -> Attempt {
        if self.failed.get(index).is_none() {
            Attempt::First
        } else {
            self.restarted.set_once(index);
            Attempt::Again
        }
    }

    /// Records now as the instant job `index`'s first attempt failed.
    pub fn failed(&self, index: usize) {
        self.failed.set(index);
    }

    /// Per job that started twice, its second start − (failure + `delay`) in
    /// µs (0 if early), and how many second starts were early.
    pub fn lateness_us(&self, delay: Duration) -> (Vec<u64>, u64) {
        let delay = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        let mut early = 0;
        let lateness = (0..self.failed.slots.len())
            .filter_map(|i| {
                let (failed, restarted) = (self.failed.get(i)?, self.restarted.get(i)?);
                let due = failed.saturating_add(delay);
                if restarted < due {
                    early += 1;
                }
                Some(restarted.saturating_sub(due) / 1_000)
            })
            .collect();
        (lateness, early)
    }
}

/// The job every side carries: its index and padding of `payload_bytes`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerJob {
    /// The job's index in the run, `0..jobs`.
    pub index: usize,
    /// `payload_bytes` of `x`.
    pub pad: String,
}

impl PeerJob {
    /// Job `index` with `payload_bytes` of padding.
    pub fn new(index: usize, payload_bytes: usize) -> Self {
        PeerJob {
            index,
            pad: "x".repeat(payload_bytes),
        }
    }
}

/// Runs `enqueue(i)` for i in 0..jobs with `producers` concurrent
/// producers; answers the elapsed time. The first error ends the run.
pub async fn closed_loop<F, Fut>(
    producers: usize,
    jobs: usize,
    enqueue: F,
) -> Result<Duration, BoxError>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    let enqueue = Arc::new(enqueue);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut running = tokio::task::JoinSet::new();
    for _ in 0..producers.max(1) {
        let (enqueue, next) = (Arc::clone(&enqueue), Arc::clone(&next));
        running.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    return Ok::<(), BoxError>(());
                }
                enqueue(i).await?;
            }
        });
    }
    while let Some(joined) = running.join_next().await {
        joined??;
    }
    Ok(started.elapsed())
}

/// Starts `enqueue(i)` for i in 0..jobs at `rate` per second on a fixed
/// schedule (each call its own task, so a slow call never delays the
/// schedule), recording in `ledger` when each was due; resolves when every
/// call returned. The first error is answered once all have.
pub async fn open_loop<F, Fut>(
    rate: f64,
    jobs: usize,
    ledger: &Ledger,
    enqueue: F,
) -> Result<(), BoxError>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!("the offered rate must be a positive number, got {rate}").into());
    }
    let start = tokio::time::Instant::now();
    let mut running = tokio::task::JoinSet::new();
    for i in 0..jobs {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due).await;
        ledger.offered(i, due.into_std());
        running.spawn(enqueue(i));
    }
    let mut first_error = None;
    while let Some(joined) = running.join_next().await {
        let outcome = joined.map_err(BoxError::from).and_then(|done| done);
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Peak resident memory of this process, KiB (`VmHWM`).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Resets this process's peak resident memory to its current size, so
/// that [`peak_rss_kib`] then tells the peak of what follows. Fails where
/// `/proc/self/clear_refs` cannot be written.
pub fn reset_peak_rss() -> Result<(), BoxError> {
    std::fs::write("/proc/self/clear_refs", "5")
        .map_err(|e| format!("cannot reset the peak RSS (/proc/self/clear_refs): {e}").into())
}

/// Awaits `work` for at most `limit`; past it, fails saying `what` did not
/// finish (the work is dropped, so a side's clean-up after it still runs).
pub async fn bounded<T>(
    what: &str,
    limit: Duration,
    work: impl Future<Output = Result<T, BoxError>>,
) -> Result<T, BoxError> {
    match tokio::time::timeout(limit, work).await {
        Ok(done) => done,
        Err(_) => Err(format!("{what} did not finish in {limit:?}").into()),
    }
}

/// The longest a side's measurement may take, set-up included; it leaves
/// time for the clean-up before the parent gives up on the child.
pub const SIDE_LIMIT: Duration = Duration::from_secs(15 * 60);
/// The longest a side's clean-up may take.
pub const CLEANUP_LIMIT: Duration = Duration::from_secs(120);
