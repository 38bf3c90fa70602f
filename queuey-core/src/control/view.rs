//! One process's view of its fleet's control state, shared by the backend
//! that follows the commands and the worker that obeys them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;

use super::command::{Command, ControlRecord};
use super::state::ControlState;
use crate::Envelope;

/// The fleet's control state as one process follows it: a backend applies
/// each command it receives, and a worker reads the state and waits for its
/// changes. Clones share one state.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queuey_core::control::{Command, ControlRecord, ControlView};
///
/// let view = ControlView::new();
/// let mut changes = view.changes();
/// view.apply(&ControlRecord::new(Command::Pause { queue: "q".into() }));
/// changes.changed().await.unwrap();
/// assert!(view.is_paused("q"));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ControlView {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: RwLock<ControlState>,
    /// Bumped on every change.
    version: watch::Sender<u64>,
    /// Whether the follower has read every command sent before it started.
    caught_up: AtomicBool,
}

impl Default for ControlView {
    fn default() -> Self {
        ControlView::new()
    }
}

impl ControlView {
    /// An empty view: nothing paused, nothing cancelled.
    pub fn new() -> Self {
        ControlView {
            inner: Arc::new(Inner {
                state: RwLock::new(ControlState::default()),
                version: watch::Sender::new(0),
                caught_up: AtomicBool::new(true),
            }),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, ControlState> {
        self.inner
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, ControlState> {
        self.inner
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies a record, and tells the watchers if anything changed.
    pub fn apply(&self, record: &ControlRecord) {
        let changed = self.write().apply(record);
        if changed {
            self.inner.version.send_modify(|v| *v += 1);
            // Pauses are few and matter to an operator reading the log; a
            // worker catching up with thousands of cancellations would
            // drown it, so those are at DEBUG.
            match &record.command {
                Command::Pause { .. } | Command::Resume { .. } => tracing::info!(
                    command = record.command.as_str(),
                    record = %record.id,
                    by = record.by.as_deref().unwrap_or("-"),
                    "control command applied"
                ),
                _ => tracing::debug!(
                    command = record.command.as_str(),
                    record = %record.id,
                    by = record.by.as_deref().unwrap_or("-"),
                    "control command applied"
                ),
            }
        }
    }

    /// Whether the view holds every command sent before its follower
    /// started; a backend that could not read that far in time hands out a
    /// view that is not caught up yet, and keeps following.
    pub fn is_caught_up(&self) -> bool {
        self.inner.caught_up.load(Ordering::Acquire)
    }

    /// Sets whether the view is caught up, and tells the watchers when that
    /// changes.
    pub fn set_caught_up(&self, caught_up: bool) {
        if self.inner.caught_up.swap(caught_up, Ordering::AcqRel) != caught_up {
            self.inner.version.send_modify(|v| *v += 1);
        }
    }

    /// Forgets everything: the commands it followed came from a stream
    /// that was deleted or replaced, and are read again from the new one.
    pub fn reset(&self) {
        *self.write() = ControlState::default();
        self.inner.version.send_modify(|v| *v += 1);
    }

    /// Forgets cancellations sent before `cutoff_ms` (milliseconds since
    /// the Unix epoch).
    pub fn forget_before(&self, cutoff_ms: u64) {
        self.write().forget_before(cutoff_ms);
    }

    /// Whether `queue` (its name on the broker) is paused.
    pub fn is_paused(&self, queue: &str) -> bool {
        self.read().is_paused(queue)
    }

    /// Whether `envelope`'s job was cancelled.
    pub fn is_cancelled(&self, envelope: &Envelope) -> bool {
        self.read().is_cancelled(envelope)
    }

    /// A copy of the whole state.
    pub fn snapshot(&self) -> ControlState {
        self.read().clone()
    }

    /// A receiver that sees every change (its value is a change counter).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.version.subscribe()
    }
}
