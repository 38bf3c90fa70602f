//! The hold-queue declarations later holds may rely on (see the lease rule
//! and the prune handshake in `hold`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Remembered declarations past this many are pruned of those no longer
/// usable.
const LEASES_KEPT: usize = 1024;

/// The last waited-for declaration of each hold queue: when it was sent,
/// and for how long after that later publishes may rely on it.
#[derive(Debug, Default)]
pub(super) struct Leases {
    sent: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Leases {
    /// When the declaration a publish into `hold` may rely on was sent, if
    /// it is younger than the reuse window it was recorded with.
    pub(super) fn usable(&self, hold: &str) -> Option<Instant> {
        let sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.get(hold)
            .filter(|(at, reuse)| at.elapsed() < *reuse)
            .map(|(at, _)| *at)
    }

    /// Records a declaration of `hold` sent at `at` that was answered, which
    /// later publishes may rely on for `reuse`.
    pub(super) fn renewed(&self, hold: &str, at: Instant, reuse: Duration) {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if sent.len() >= LEASES_KEPT && !sent.contains_key(hold) {
            sent.retain(|_, (at, reuse)| at.elapsed() < *reuse);
        }
        let entry = sent.entry(hold.to_owned()).or_insert((at, reuse));
        if entry.0 < at {
            *entry = (at, reuse);
        }
    }

    /// Forgets the declaration of a hold queue found missing.
    pub(super) fn forget(&self, hold: &str) {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.remove(hold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_declaration_is_reused_within_its_window_only() {
        let leases = Leases::default();
        let reuse = Duration::from_millis(250);
        assert_eq!(leases.usable("h"), None);
        let sent = Instant::now();
        leases.renewed("h", sent, reuse);
        tokio::time::advance(Duration::from_millis(249)).await;
        assert_eq!(leases.usable("h"), Some(sent));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(leases.usable("h"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_forgotten_declaration_is_not_reused() {
        let leases = Leases::default();
        leases.renewed("h", Instant::now(), Duration::from_secs(3_600));
        assert!(leases.usable("h").is_some());
        leases.forget("h");
        assert_eq!(leases.usable("h"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_declaration_never_replaces_a_newer_one() {
        let leases = Leases::default();
        let reuse = Duration::from_secs(10);
        let old = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        let new = Instant::now();
        leases.renewed("h", new, reuse);
        leases.renewed("h", old, reuse);
        assert_eq!(leases.usable("h"), Some(new));
    }

    #[tokio::test(start_paused = true)]
    async fn stale_declarations_are_pruned() {
        let leases = Leases::default();
        let reuse = Duration::from_millis(10);
        for i in 0..LEASES_KEPT {
            leases.renewed(&format!("h{i}"), Instant::now(), reuse);
        }
        tokio::time::advance(reuse).await;
        leases.renewed("fresh", Instant::now(), reuse);
        let kept = leases.sent.lock().unwrap().len();
        assert_eq!(kept, 1);
    }
}
