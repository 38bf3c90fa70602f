//! The holds found stalled, as callers see them: a set the watchdog keeps
//! and [`RabbitMqBackend::stalled_holds`](crate::RabbitMqBackend::stalled_holds)
//! reads, and the gauge that mirrors it.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use super::metric;

/// A quorum hold queue that stopped releasing its jobs, as the [hold
/// watchdog](crate#hold-watchdog) found it.
///
/// Its jobs are kept by the broker, not lost, but they do not come back to
/// their work queue until the hold's Raft member is restarted (see the
/// [hold watchdog](crate#hold-watchdog) for the remedy).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StalledHold {
    /// The hold queue's name, e.g. `app.emails.deferred.quorum.5000`.
    pub hold: String,
    /// The work queue it releases into, e.g. `app.emails`.
    pub queue: String,
    /// Jobs whose delay is over and that still wait in the hold, at the
    /// watchdog's last read.
    pub jobs: u64,
    /// Since when the hold has released nothing while holding jobs that
    /// were due (by this host's clock, to within one read).
    pub since: SystemTime,
}

/// The stalled holds, by hold name.
#[derive(Debug, Default)]
pub(crate) struct Stalled {
    holds: Mutex<BTreeMap<String, StalledHold>>,
}

impl Stalled {
    /// Every stalled hold, by name.
    pub(crate) fn list(&self) -> Vec<StalledHold> {
        self.lock().values().cloned().collect()
    }

    /// Records a stalled hold (or its new count) and raises its gauge.
    #[cfg_attr(not(feature = "hold-watch"), allow(dead_code))]
    pub(crate) fn set(&self, hold: StalledHold) {
        metrics::gauge!(metric::HOLD_STALLED, "queue" => hold.queue.clone(), "hold" => hold.hold.clone())
            .set(1.0);
        self.lock().insert(hold.hold.clone(), hold);
    }

    /// Updates the count of a hold already recorded.
    #[cfg_attr(not(feature = "hold-watch"), allow(dead_code))]
    pub(crate) fn update_jobs(&self, hold: &str, jobs: u64) {
        if let Some(entry) = self.lock().get_mut(hold) {
            entry.jobs = jobs;
        }
    }

    /// Forgets a hold and lowers its gauge; the hold, if it was recorded.
    pub(crate) fn clear(&self, hold: &str) -> Option<StalledHold> {
        let removed = self.lock().remove(hold)?;
        metrics::gauge!(metric::HOLD_STALLED, "queue" => removed.queue.clone(), "hold" => removed.hold.clone())
            .set(0.0);
        Some(removed)
    }

    /// Forgets every hold and lowers their gauges (the watch stopped).
    pub(crate) fn clear_all(&self) {
        let names: Vec<String> = self.lock().keys().cloned().collect();
        for name in names {
            self.clear(&name);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, StalledHold>> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
