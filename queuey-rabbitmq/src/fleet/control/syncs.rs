//! The callers waiting for the follower to read their sync marker back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use uuid::Uuid;

/// Waiters by their marker's nonce, and why the follower ended once it
/// has.
#[derive(Debug, Default)]
pub(super) struct Syncs {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    waiting: HashMap<Uuid, oneshot::Sender<()>>,
    ended: Option<Arc<str>>,
}

impl Syncs {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the marker `nonce`: the receiver answers once the follower
    /// has read it, and fails if the follower ends first. `Err` with the
    /// reason when it has ended already.
    pub(super) fn wait(&self, nonce: Uuid) -> Result<oneshot::Receiver<()>, Arc<str>> {
        let mut state = self.state();
        if let Some(reason) = &state.ended {
            return Err(Arc::clone(reason));
        }
        let (reached, receiver) = oneshot::channel();
        state.waiting.insert(nonce, reached);
        Ok(receiver)
    }

    /// The follower read the marker `nonce` (any follower's: only this
    /// backend's own have waiters).
    pub(super) fn reached(&self, nonce: Uuid) -> bool {
        let reached = self.state().waiting.remove(&nonce);
        reached.map(|reached| reached.send(())).is_some()
    }

    /// Whether a caller waits for the marker `nonce` (this backend's own),
    /// without telling it.
    pub(super) fn is_waiting(&self, nonce: Uuid) -> bool {
        self.state().waiting.contains_key(&nonce)
    }

    /// A caller stopped waiting for `nonce`.
    pub(super) fn forget(&self, nonce: Uuid) {
        self.state().waiting.remove(&nonce);
    }

    /// The follower ended: every caller waiting is told, and later ones
    /// get `reason`.
    pub(super) fn end(&self, reason: &str) {
        let mut state = self.state();
        state.ended = Some(Arc::from(reason));
        state.waiting.clear();
    }

    /// Why the follower ended, if it has.
    pub(super) fn ended(&self) -> Option<Arc<str>> {
        self.state().ended.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_hears_its_own_marker_or_the_end() {
        let syncs = Syncs::default();
        let (mine, other) = (Uuid::new_v4(), Uuid::new_v4());
        let waiting = syncs.wait(mine).unwrap();
        assert!(syncs.is_waiting(mine) && !syncs.is_waiting(other));
        assert!(!syncs.reached(other), "another process's marker");
        assert!(syncs.reached(mine));
        waiting.await.unwrap();

        let waiting = syncs.wait(mine).unwrap();
        syncs.end("closed");
        assert!(waiting.await.is_err());
        assert_eq!(syncs.wait(other).unwrap_err().as_ref(), "closed");
        assert_eq!(syncs.ended().as_deref(), Some("closed"));
    }
}
