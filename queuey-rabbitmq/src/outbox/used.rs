//! When the backend last parked a job in each quorum hold queue, for its
//! pruner.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

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
    pub(super) fn idle(&self, after: Duration) -> Vec<(String, String)> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.iter()
            .filter(|(_, (at, _))| at.elapsed() >= after)
            .map(|(hold, (_, queue))| (hold.clone(), queue.clone()))
            .collect()
    }

    /// Forgets `hold` unless it was used again within `after`.
    pub(super) fn forget_idle(&self, hold: &str, after: Duration) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.get(hold).is_some_and(|(at, _)| at.elapsed() >= after) {
            last.remove(hold);
        }
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
}
