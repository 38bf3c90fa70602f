//! Why a test run failed.

use crate::WorkerError;

use super::Report;

/// Why a [`TestRun`](super::TestRun) gave no [`Report`] of its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestRunError {
    /// The worker stopped with an error (its backend was closed, say).
    #[error("the worker stopped with an error during the run: {0}")]
    Worker(#[from] WorkerError),

    /// The worker stopped before the run ended, without an error: something
    /// else called `shutdown` on its handle. The report holds what happened
    /// until then.
    #[error(
        "the worker was shut down from its handle before the run ended; leave the shutdown to \
         the run"
    )]
    Stopped {
        /// What happened until the worker stopped.
        report: Box<Report>,
    },

    /// Fewer jobs finished than [`until_finished`](super::TestRun::until_finished)
    /// asked for: the worker ran out of work, or the clock reached the
    /// run's horizon first. The report shows what happened instead.
    #[error(
        "{finished} of the {wanted} jobs awaited finished before the run ended ({ended}); \
         the report lists every settle"
    )]
    Unfinished {
        /// How many jobs were awaited.
        wanted: usize,
        /// How many finished.
        finished: usize,
        /// Why the run ended.
        ended: super::Ended,
        /// What happened.
        report: Box<Report>,
    },
}
