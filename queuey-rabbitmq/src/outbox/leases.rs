//! The hold-queue declarations later holds may rely on (see the lease rule
//! in `hold`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::topology::HoldQueues;

/// Remembered leases past this many are pruned of those no longer usable.
const LEASES_KEPT: usize = 1024;

/// The last waited-for declaration of each hold queue: when it was sent.
#[derive(Debug, Default)]
pub(super) struct Leases {
    sent: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Leases {
    /// When the declaration a publish into `hold` may rely on was sent: for
    /// a classic hold, if it is younger than a quarter of `ttl`; for a
    /// quorum hold, which has no lease, any declaration still remembered.
    pub(super) fn usable(&self, hold: &str, ttl: Duration, holds: HoldQueues) -> Option<Instant> {
        let sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.get(hold)
            .map(|(at, _)| *at)
            .filter(|at| holds == HoldQueues::Quorum || at.elapsed() < ttl / 4)
    }

    /// Records a declaration of `hold` sent at `at` that was answered.
    pub(super) fn renewed(&self, hold: &str, at: Instant, ttl: Duration) {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if sent.len() >= LEASES_KEPT && !sent.contains_key(hold) {
            sent.retain(|_, (at, ttl)| at.elapsed() < *ttl / 4);
        }
        let entry = sent.entry(hold.to_owned()).or_insert((at, ttl));
        if entry.0 < at {
            *entry = (at, ttl);
        }
    }

    /// Forgets the lease of a hold queue found missing.
    pub(super) fn forget(&self, hold: &str) {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(hold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_reused_for_a_quarter_of_a_ttl() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(1_000);
        let classic = HoldQueues::Classic;
        assert_eq!(leases.usable("h", ttl, classic), None);
        let sent = Instant::now();
        leases.renewed("h", sent, ttl);
        tokio::time::advance(Duration::from_millis(249)).await;
        assert_eq!(leases.usable("h", ttl, classic), Some(sent));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(leases.usable("h", ttl, classic), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quorum_hold_is_declared_once_until_found_gone() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(1_000);
        let quorum = HoldQueues::Quorum;
        assert_eq!(leases.usable("h", ttl, quorum), None);
        let sent = Instant::now();
        leases.renewed("h", sent, ttl);
        tokio::time::advance(Duration::from_secs(3_600)).await;
        assert_eq!(leases.usable("h", ttl, quorum), Some(sent));
        leases.forget("h");
        assert_eq!(leases.usable("h", ttl, quorum), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_declaration_never_replaces_a_newer_one() {
        let leases = Leases::default();
        let ttl = Duration::from_secs(10);
        let old = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        let new = Instant::now();
        leases.renewed("h", new, ttl);
        leases.renewed("h", old, ttl);
        assert_eq!(leases.usable("h", ttl, HoldQueues::Classic), Some(new));
        leases.forget("h");
        assert_eq!(leases.usable("h", ttl, HoldQueues::Classic), None);
    }

    #[tokio::test(start_paused = true)]
    async fn stale_leases_are_pruned() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(10);
        for i in 0..LEASES_KEPT {
            leases.renewed(&format!("h{i}"), Instant::now(), ttl);
        }
        tokio::time::advance(ttl).await;
        leases.renewed("fresh", Instant::now(), ttl);
        let kept = leases.sent.lock().unwrap().len();
        assert_eq!(kept, 1);
    }
}
