//! What a test run hands back.

use std::fmt;
use std::time::Duration;

use queuey_core::memory::Settlement;
use queuey_core::{Disposition, Uuid};
use tokio::time::Instant;

/// Why a [`TestRun`](super::TestRun) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ended {
    /// Nothing was ready, nothing ran, and nothing was held to come back
    /// before the horizon.
    Idle,
    /// As many jobs as [`until_finished`](super::TestRun::until_finished)
    /// asked for reached their end.
    Finished,
    /// The clock passed the run's [horizon](super::TestRun::horizon).
    Horizon,
}

impl Ended {
    /// A short lowercase name: `idle`, `finished`, `horizon`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Idle => "idle",
            Ended::Finished => "finished",
            Ended::Horizon => "horizon",
        }
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was still on the worker's queues when the run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Left {
    /// Jobs waiting on the queues.
    pub ready: usize,
    /// Deliveries taken and not settled (none once the worker has drained,
    /// unless a job outlived its shutdown timeout).
    pub running: usize,
    /// Jobs held for a retry, a deferral or a delayed enqueue.
    pub held: usize,
    /// How long after the end of the run the first held job comes back.
    pub next_release: Option<Duration>,
}

impl Left {
    /// Whether nothing was left at all.
    pub fn is_empty(&self) -> bool {
        self.ready == 0 && self.running == 0 && self.held == 0
    }
}

/// What happened during a [`TestRun`](super::TestRun): every delivery
/// settled, in order, and what was left.
///
/// Each [`Settlement`] names the job (type, id, attempt) and its
/// [`Disposition`] (`Ack`, `Retry`, `Defer` or `DeadLetter`).
///
/// Its `Debug` lists them one a line with the time each came, so a failed
/// assertion shows the whole run:
///
/// ```text
/// Report { ended: idle, after: 3s, left: nothing
///   +0ns    charge 67e55044-10b1-426f-9247-bb680e5fe0c8 attempt 1 on billing: retry in 1s
///   +1s     charge 67e55044-10b1-426f-9247-bb680e5fe0c8 attempt 2 on billing: ack
/// }
/// ```
#[derive(Clone)]
pub struct Report {
    pub(super) settlements: Vec<Settlement>,
    pub(super) started: Instant,
    pub(super) elapsed: Duration,
    pub(super) ended: Ended,
    pub(super) left: Left,
}

impl Report {
    /// Every delivery settled during the run, oldest first.
    pub fn settlements(&self) -> &[Settlement] {
        &self.settlements
    }

    /// What became of one job, delivery by delivery: for a job that failed
    /// once and then succeeded, `[Retry { delay }, Ack]`.
    pub fn of_job(&self, job_id: Uuid) -> Vec<Disposition> {
        self.settlements
            .iter()
            .filter(|s| s.job_id == job_id)
            .map(|s| s.disposition.clone())
            .collect()
    }

    /// The settlements of jobs of one type.
    pub fn of_type<'a>(&'a self, job_type: &'a str) -> impl Iterator<Item = &'a Settlement> {
        self.settlements
            .iter()
            .filter(move |s| s.job_type == job_type)
    }

    /// Jobs acknowledged: done.
    pub fn acknowledged(&self) -> impl Iterator<Item = &Settlement> {
        self.kind(|d| matches!(d, Disposition::Ack))
    }

    /// Each retry, with its delay in the disposition.
    pub fn retried(&self) -> impl Iterator<Item = &Settlement> {
        self.kind(|d| matches!(d, Disposition::Retry { .. }))
    }

    /// Each deferral, with its delay in the disposition.
    pub fn deferred(&self) -> impl Iterator<Item = &Settlement> {
        self.kind(|d| matches!(d, Disposition::Defer { .. }))
    }

    /// Jobs dead-lettered, with the reason in the disposition.
    pub fn dead_lettered(&self) -> impl Iterator<Item = &Settlement> {
        self.kind(|d| matches!(d, Disposition::DeadLetter { .. }))
    }

    /// Jobs acknowledged or dead-lettered, each once however often retried
    /// (as [`WorkerHandle::jobs_finished`](crate::WorkerHandle::jobs_finished)).
    pub fn jobs_finished(&self) -> usize {
        self.settlements.iter().filter(|s| s.is_final()).count()
    }

    /// Why the run ended.
    pub fn ended(&self) -> Ended {
        self.ended
    }

    /// How long the run took by tokio's clock (on a paused clock: the time
    /// it skipped).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// What was left on the worker's queues.
    pub fn left(&self) -> &Left {
        &self.left
    }

    fn kind(&self, is: fn(&Disposition) -> bool) -> impl Iterator<Item = &Settlement> {
        self.settlements.iter().filter(move |s| is(&s.disposition))
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Report {{ ended: {}, after: {:?}, left: ",
            self.ended, self.elapsed
        )?;
        let left = &self.left;
        if left.is_empty() {
            f.write_str("nothing")?;
        } else {
            write!(
                f,
                "{} ready, {} running, {} held",
                left.ready, left.running, left.held
            )?;
            if let Some(next) = left.next_release {
                write!(f, " (the first back in {next:?})")?;
            }
        }
        for s in &self.settlements {
            let at = format!("+{:?}", s.at.saturating_duration_since(self.started));
            write!(f, "\n  {at:<7} {s:?}")?;
        }
        f.write_str("\n}")
    }
}
