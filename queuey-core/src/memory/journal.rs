//! What the memory backend records of the deliveries it settles, for tests
//! that look at what happened to each job.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use tokio::time::Instant;
use uuid::Uuid;

use crate::{Disposition, Envelope, lock};

/// One delivery the [`MemoryBackend`](super::MemoryBackend) settled: which
/// job, which attempt, and what became of it.
///
/// The disposition is the one carried out (a wait too long for a hold reads
/// as the dead letter it became, [`Disposition::never_early`]). Its `Debug`
/// is one line, for a failed assertion:
/// `send_email 67e55044-10b1-426f-9247-bb680e5fe0c8 attempt 2 on app.emails: retry in 2s`.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settlement {
    /// The job's type, as its envelope names it.
    pub job_type: String,
    /// The job's id, the same through its retries and deferrals.
    pub job_id: Uuid,
    /// The queue the delivery came from.
    pub queue: String,
    /// The attempt this delivery was (1 for the first).
    pub attempt: u32,
    /// How often the job had been deferred before this delivery.
    pub deferrals: u32,
    /// What the backend did with it.
    pub disposition: Disposition,
    /// When it was settled, by tokio's clock.
    pub at: Instant,
}

impl Settlement {
    pub(super) fn new(envelope: &Envelope, queue: &str, disposition: Disposition) -> Self {
        Settlement {
            job_type: envelope.job_type.clone(),
            job_id: envelope.job_id,
            queue: queue.to_owned(),
            attempt: envelope.attempt,
            deferrals: envelope.deferrals,
            disposition,
            at: Instant::now(),
        }
    }

    /// Whether the job reached its end with this settle: acknowledged or
    /// dead-lettered (a retry, a deferral or a requeue brings it back).
    pub fn is_final(&self) -> bool {
        matches!(
            self.disposition,
            Disposition::Ack | Disposition::DeadLetter { .. }
        )
    }
}

impl fmt::Debug for Settlement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} attempt {} on {}: {}",
            self.job_type, self.job_id, self.attempt, self.queue, self.disposition
        )
    }
}

/// The settlements a [`MemoryBackend`](super::MemoryBackend) records while
/// this log lives; from [`MemoryBackend::record_settlements`](super::MemoryBackend::record_settlements).
///
/// Dropping it stops the recording.
pub struct SettlementLog {
    entries: Arc<Mutex<Vec<Settlement>>>,
}

impl SettlementLog {
    /// Removes and returns what was recorded so far, oldest first.
    pub fn take(&self) -> Vec<Settlement> {
        std::mem::take(&mut *lock(&self.entries))
    }
}

impl fmt::Debug for SettlementLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettlementLog")
            .field("entries", &*lock(&self.entries))
            .finish()
    }
}

/// The logs a backend writes to; each is dropped from the list once its
/// reader is gone.
#[derive(Default)]
pub(super) struct Journal {
    logs: Mutex<Vec<Weak<Mutex<Vec<Settlement>>>>>,
}

impl Journal {
    /// A new log, recording from now on.
    pub(super) fn open(&self) -> SettlementLog {
        let entries = Arc::new(Mutex::new(Vec::new()));
        let mut logs = lock(&self.logs);
        logs.retain(|log| log.strong_count() > 0);
        logs.push(Arc::downgrade(&entries));
        SettlementLog { entries }
    }

    /// Whether anyone records: the settle path builds a [`Settlement`]
    /// only then.
    pub(super) fn is_recording(&self) -> bool {
        let logs = lock(&self.logs);
        logs.iter().any(|log| log.strong_count() > 0)
    }

    /// Adds the settlement to every open log.
    pub(super) fn record(&self, settlement: Settlement) {
        let mut logs = lock(&self.logs);
        logs.retain(|log| log.strong_count() > 0);
        for log in logs.iter().filter_map(Weak::upgrade) {
            lock(&log).push(settlement.clone());
        }
    }
}
