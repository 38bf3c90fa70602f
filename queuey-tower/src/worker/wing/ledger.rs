//! What the heartbeats report of the jobs: a job is listed among the
//! running ones from its start until its run ends, and counted in its
//! queue's totals once it is settled.

use std::future::Future;
use std::sync::Arc;

use queuey_core::Disposition;

use super::{Ended, Extras, Settled, Starting, Wing};
use crate::worker::heartbeat::{Ledger, Tally};

/// The ledger wing.
pub(crate) struct LedgerWing {
    ledger: Arc<Ledger>,
    /// Each queue's tally, found once: a job looks its own up without a
    /// lock.
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

/// One job in the ledger.
pub(crate) struct Entry {
    /// Its key among the running jobs, while it runs; `None` for a job
    /// that does not run.
    running: Option<u64>,
    /// Its queue's tally.
    tally: Option<Arc<Tally>>,
}

impl Wing for LedgerWing {
    type Job = Entry;

    fn start(&self, job: &Starting<'_>, _extras: &mut Extras) -> Entry {
        let running = job
            .job_type
            .filter(|_| !job.refused)
            .map(|job_type| self.ledger.started(job.envelope, job_type, job.queue));
        let tally = self
            .tallies
            .iter()
            .find(|tally| tally.is_of(job.queue))
            .map(Arc::clone);
        Entry { running, tally }
    }

    fn run_ended(
        &self,
        entry: &mut Entry,
        disposition: Disposition,
        _job: &Ended<'_>,
    ) -> Disposition {
        if let Some(key) = entry.running.take() {
            self.ledger.finished(key);
        }
        disposition
    }

    fn settled<'a>(
        &'a self,
        entry: Entry,
        job: &'a Settled<'a>,
    ) -> impl Future<Output = ()> + Send + 'a {
        if let Some(tally) = entry.tally {
            tally.settled(job.what);
        }
        async {}
    }
}
