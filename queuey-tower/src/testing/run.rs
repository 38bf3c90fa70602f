//! Running a worker on the memory backend until it has nothing left to do.

use std::borrow::Borrow;
use std::fmt;
use std::time::Duration;

use queuey_core::Queues;
use queuey_core::backend::Backend;
use queuey_core::memory::{MemoryBackend, Settlement};
use tokio::time::Instant;

use super::{Ended, Left, Report, TestRunError};
use crate::Worker;

/// How far ahead a [`TestRun`] looks for held jobs, unless told otherwise:
/// one hour.
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(3_600);

/// Runs a [`Worker`] on a [`MemoryBackend`] until it has nothing left to
/// do, or until a number of jobs finished, and reports what happened.
///
/// The run ends at the first of:
///
/// - **idle**: nothing ready, running, or held (a retry, a deferral, a
///   delayed enqueue) to come back before the horizon. A worker with
///   periodic jobs is never idle;
/// - **finished**: with [`until_finished(n)`](Self::until_finished), once `n`
///   jobs reached their end (acknowledged or dead-lettered);
/// - **horizon**: the clock passed the run's start plus the
///   [horizon](Self::horizon). What is due at the horizon itself still
///   runs; jobs held past it stay held (counted in [`Report::left`]), and
///   running ones finish during the shutdown.
///
/// Then it shuts the worker down as [`WorkerHandle::shutdown`](crate::WorkerHandle::shutdown)
/// does and returns the [`Report`]. The run waits on tokio's clock: under a
/// paused clock (`#[tokio::test(start_paused = true)]`, tokio's `test-util`
/// feature) a job retried for minutes is tested in milliseconds; on a
/// running clock it takes as long as its holds.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use queuey_core::{handler_fn, Disposition, Job, JobContext, JobError, Producer, Queues};
/// use queuey_core::memory::MemoryBackend;
/// use queuey_tower::Worker;
/// use queuey_tower::testing::TestRun;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// # enum AppQueues {
/// #     #[queue(retry(max_attempts = 3, backoff = "fixed", delay = "10m"))]
/// #     Billing,
/// # }
/// # #[derive(Job, Serialize, Deserialize)]
/// # #[job(queue = AppQueues::Billing)]
/// # struct Charge;
///
/// let backend = Arc::new(MemoryBackend::new());
/// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
/// let id = producer.enqueue(&Charge).await?;
///
/// let worker = Worker::<AppQueues, _>::builder(backend)
///     .handler(handler_fn(|_: Charge, ctx: JobContext| async move {
///         match ctx.attempt() {
///             1 => Err(JobError::retryable("the card network timed out")),
///             _ => Ok(()),
///         }
///     }))
///     .build()
///     .await?;
/// let report = TestRun::new(worker).until_finished(1).run().await?;
/// let ten_minutes = Duration::from_secs(600);
/// assert_eq!(report.of_job(id), [Disposition::Retry { delay: ten_minutes }, Disposition::Ack]);
/// assert!(report.elapsed() >= ten_minutes);
/// # Ok(())
/// # }
/// ```
pub struct TestRun<Q, B> {
    worker: Worker<Q, B>,
    horizon: Duration,
    wanted: Option<usize>,
}

impl<Q, B> TestRun<Q, B>
where
    Q: Queues,
    B: Backend + Borrow<MemoryBackend>,
{
    /// A run of `worker`, until idle, over the [`DEFAULT_HORIZON`]. The
    /// worker must not have run: the run starts it.
    pub fn new(worker: Worker<Q, B>) -> Self {
        TestRun {
            worker,
            horizon: DEFAULT_HORIZON,
            wanted: None,
        }
    }

    /// How far the run looks ahead from its start (an hour unless set): jobs
    /// due back later are left held, and the run ends once the clock passes it.
    pub fn horizon(mut self, horizon: Duration) -> Self {
        self.horizon = horizon;
        self
    }

    /// Ends the run once `jobs` jobs reached their end (acknowledged or
    /// dead-lettered), rather than when the worker is idle. Ending idle or
    /// at the horizon before that is a [`TestRunError::Unfinished`].
    pub fn until_finished(mut self, jobs: usize) -> Self {
        self.wanted = Some(jobs);
        self
    }

    /// Runs the worker and reports what happened. Fails when the worker stops
    /// with an error or is shut down by something else, or, with
    /// [`until_finished`](Self::until_finished), when fewer jobs finished.
    pub async fn run(self) -> Result<Report, TestRunError> {
        let TestRun {
            worker,
            horizon,
            wanted,
        } = self;
        let memory: MemoryBackend = (**worker.backend()).borrow().clone();
        let queues = worker.broker_queues();
        let periodic = worker.has_periodic();
        let handle = worker.handle();
        let log = memory.record_settlements();
        let started = Instant::now();
        // Past what the clock can count: no horizon.
        let deadline = started.checked_add(horizon);
        // Just past the horizon, so what is due at it runs first.
        let past_deadline = deadline.and_then(|d| d.checked_add(Duration::from_millis(1)));
        let mut settlements: Vec<Settlement> = Vec::new();
        let running = worker.run();
        tokio::pin!(running);
        let ended = loop {
            // Registered before looking, so a change in between wakes it.
            let changed = memory.changed();
            settlements.extend(log.take());
            let finished = settlements.iter().filter(|s| s.is_final()).count();
            if wanted.is_some_and(|n| finished >= n) {
                break Ended::Finished;
            }
            let now = Instant::now();
            let (left, next) = look(&memory, &queues);
            let next = next.filter(|due| deadline.is_none_or(|d| *due <= d));
            if !periodic && left.ready == 0 && left.running == 0 && next.is_none() {
                break Ended::Idle;
            }
            if deadline.is_some_and(|d| now > d) {
                break Ended::Horizon;
            }
            let wake = next.into_iter().chain(past_deadline).min();
            tokio::select! {
                biased;
                stopped = &mut running => {
                    stopped?;
                    settlements.extend(log.take());
                    let report = report(&memory, &queues, settlements, started, Ended::Idle);
                    return Err(TestRunError::Stopped { report: Box::new(report) });
                }
                () = changed => {}
                () = sleep_until(wake) => {}
            }
        };
        handle.shutdown();
        running.await?;
        settlements.extend(log.take());
        let report = report(&memory, &queues, settlements, started, ended);
        match wanted {
            Some(wanted) if report.jobs_finished() < wanted => Err(TestRunError::Unfinished {
                wanted,
                finished: report.jobs_finished(),
                ended,
                report: Box::new(report),
            }),
            _ => Ok(report),
        }
    }
}

/// Runs `worker` until it is idle and reports what happened: a
/// [`TestRun`] with its defaults.
pub async fn run_until_idle<Q, B>(worker: Worker<Q, B>) -> Result<Report, TestRunError>
where
    Q: Queues,
    B: Backend + Borrow<MemoryBackend>,
{
    TestRun::new(worker).run().await
}

impl<Q, B: fmt::Debug> fmt::Debug for TestRun<Q, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestRun")
            .field("worker", &self.worker)
            .field("horizon", &self.horizon)
            .field("until_finished", &self.wanted)
            .finish()
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What is on the worker's queues now (but `next_release`), and when the
/// first held job comes back.
fn look(memory: &MemoryBackend, queues: &[String]) -> (Left, Option<Instant>) {
    let mut left = Left::default();
    let mut next_release = None;
    for queue in queues {
        left.ready += memory.ready_count(queue);
        left.running += memory.unacked_count(queue);
        left.held += memory.held_count(queue);
        if let Some(due) = memory.next_release(queue) {
            next_release = Some(next_release.map_or(due, |n: Instant| n.min(due)));
        }
    }
    (left, next_release)
}

fn report(
    memory: &MemoryBackend,
    queues: &[String],
    settlements: Vec<Settlement>,
    started: Instant,
    ended: Ended,
) -> Report {
    let now = Instant::now();
    let (mut left, next_release) = look(memory, queues);
    left.next_release = next_release.map(|due| due.saturating_duration_since(now));
    Report {
        settlements,
        started,
        elapsed: now.saturating_duration_since(started),
        ended,
        left,
    }
}
