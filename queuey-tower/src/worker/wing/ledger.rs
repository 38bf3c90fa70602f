//! What the heartbeats report of the jobs: a job is listed among the
//! running ones, with its latest progress report, from its start until its
//! run ends, and counted in its queue's totals once it is settled.

use std::future::Future;
use std::sync::Arc;

use queuey_core::Disposition;

use super::{Ended, Extras, Settled, Starting, Wing};
use crate::worker::heartbeat::{Ledger, Tally};

/// The ledger wing.
pub(crate) struct LedgerWing {
    ledger: Arc<Ledger>,
    /// Each queue's tally, found once: a settled job counts in its own
    /// without a lock.
    tallies: Vec<Arc<Tally>>,
}

impl LedgerWing {
    pub(crate) fn new(ledger: &Arc<Ledger>, queues: &[Arc<str>]) -> Self {
        LedgerWing {
            ledger: Arc::clone(ledger),
            tallies: queues.iter().map(|queue| ledger.tally(queue)).collect(),
        }
    }
}

impl Wing for LedgerWing {
    /// The job's key among the running jobs, while it runs; `None` for a
    /// job that does not run.
    type Job = Option<u64>;

    fn start(&self, job: &Starting<'_>, extras: &mut Extras) -> Option<u64> {
        let job_type = job.job_type.filter(|_| !job.refused)?;
        let progress = extras.progress.clone().unwrap_or_default();
        Some(
            self.ledger
                .started(job.envelope, job_type, job.queue, progress),
        )
    }

    fn run_ended(
        &self,
        running: &mut Option<u64>,
        disposition: Disposition,
        _job: &mut Ended<'_>,
    ) -> Disposition {
        if let Some(key) = running.take() {
            self.ledger.finished(key);
        }
        disposition
    }

    fn settled<'a>(
        &'a self,
        _running: Option<u64>,
        job: &'a Settled<'a>,
    ) -> impl Future<Output = ()> + Send + 'a {
        if let Some(tally) = self.tallies.iter().find(|tally| tally.is_of(job.queue)) {
            tally.settled(job.what);
        }
        async {}
    }
}
