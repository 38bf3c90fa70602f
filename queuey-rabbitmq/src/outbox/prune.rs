//! The backend's own pruner: the quorum hold queues this backend parked
//! jobs in, once it has not used one for
//! [`prune_holds_after`](crate::RabbitMqOptions::prune_holds_after), are
//! retired (see `retire`): deleted when they are empty and nobody uses
//! them, kept otherwise and looked at again on the next sweep.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;

use super::Outbox;
use super::retire::HoldPruned;

/// How many holds one sweep retires at once (each takes at least the
/// retirement grace).
const RETIRED_AT_ONCE: usize = 8;

/// The shortest and the longest time between two sweeps.
const SWEEP_MIN: Duration = Duration::from_secs(1);
const SWEEP_MAX: Duration = Duration::from_secs(15 * 60);

/// When each quorum hold queue was last used by this backend, and whose
/// hold it is.
#[derive(Debug, Default)]
pub(super) struct Used {
    last: Mutex<HashMap<String, (Instant, String)>>,
}

impl Used {
    /// Records a job parked in `hold`, a hold of `queue`, now.
    pub(super) fn touch(&self, hold: &str, queue: &str) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match last.get_mut(hold) {
            Some(entry) => entry.0 = now,
            None => {
                last.insert(hold.to_owned(), (now, queue.to_owned()));
            }
        }
    }

    /// The holds (with their work queues) not used for `after`.
    fn idle(&self, after: Duration) -> Vec<(String, String)> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.iter()
            .filter(|(_, (at, _))| at.elapsed() >= after)
            .map(|(hold, (_, queue))| (hold.clone(), queue.clone()))
            .collect()
    }

    /// Forgets `hold` unless it was used again within `after`.
    fn forget_idle(&self, hold: &str, after: Duration) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.get(hold).is_some_and(|(at, _)| at.elapsed() >= after) {
            last.remove(hold);
        }
    }
}

/// How long the pruner sleeps between two sweeps: a quarter of the idle
/// time, within [`SWEEP_MIN`] and [`SWEEP_MAX`].
fn sweep_period(after: Duration) -> Duration {
    (after / 4).clamp(SWEEP_MIN, SWEEP_MAX)
}

/// Retires, every sweep, the holds `outbox`'s backend has not used for
/// `after`; returns once the backend is gone or closed.
pub(crate) async fn prune_idle_holds(outbox: Weak<Outbox>, after: Duration) {
    let period = sweep_period(after);
    loop {
        tokio::time::sleep(period).await;
        let Some(outbox) = outbox.upgrade() else {
            return;
        };
        if outbox.sender.link.is_closed() {
            return;
        }
        let idle = outbox.holds.used.idle(after);
        let outbox = &outbox;
        futures::stream::iter(idle)
            .for_each_concurrent(RETIRED_AT_ONCE, |(hold, queue)| async move {
                match outbox.retire_hold(&queue, &hold).await {
                    Ok(HoldPruned::Deleted { .. } | HoldPruned::Missing) => {
                        outbox.holds.used.forget_idle(&hold, after);
                    }
                    Ok(kept) => {
                        tracing::debug!(hold = %hold, ?kept, "kept an idle hold queue");
                    }
                    Err(error) => {
                        tracing::debug!(hold = %hold, %error, "could not prune an idle hold queue; trying again on the next sweep");
                    }
                }
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_hold_is_idle_once_unused_for_the_time_given() {
        let used = Used::default();
        let after = Duration::from_secs(60);
        used.touch("q.deferred.quorum.1000", "q");
        assert!(used.idle(after).is_empty());
        tokio::time::advance(after).await;
        assert_eq!(
            used.idle(after),
            vec![("q.deferred.quorum.1000".to_owned(), "q".to_owned())]
        );
        used.touch("q.deferred.quorum.1000", "q");
        assert!(used.idle(after).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_used_again_during_its_prune_is_remembered() {
        let used = Used::default();
        let after = Duration::from_secs(60);
        used.touch("h", "q");
        tokio::time::advance(after).await;
        // A job parked while the sweep retired it: the hold was declared
        // again and must be looked at again later.
        used.touch("h", "q");
        used.forget_idle("h", after);
        tokio::time::advance(after).await;
        assert_eq!(used.idle(after).len(), 1);
        used.forget_idle("h", after);
        assert!(used.idle(after).is_empty());
    }

    #[test]
    fn sweeps_come_every_quarter_of_the_idle_time_within_bounds() {
        assert_eq!(sweep_period(Duration::from_secs(3_600)), SWEEP_MAX);
        assert_eq!(sweep_period(Duration::from_secs(2)), SWEEP_MIN);
        assert_eq!(
            sweep_period(Duration::from_secs(120)),
            Duration::from_secs(30)
        );
    }
}
