//! A queue's gate: its loop takes deliveries only while the gate is open.
//!
//! The gate closes while the queue is paused: running jobs finish, a
//! delivery taken but not started goes back to the broker, and the loop
//! waits. Without control commands the gate never closes.

use std::sync::Arc;

use queuey_core::control::ControlView;
use tokio::sync::watch;

use super::handle::{HandleInner, stopped};
use crate::metrics::QUEUE_PAUSED;

/// One queue loop's gate.
pub(crate) struct QueueGate {
    /// The fleet's pauses, for a worker that follows control commands.
    pause: Option<Pause>,
    queue: Arc<str>,
}

/// The control state, as one queue's gate follows it.
struct Pause {
    view: ControlView,
    changes: watch::Receiver<u64>,
}

impl QueueGate {
    /// The gate of `queue`, closed while `control` has it paused.
    pub(crate) fn new(control: Option<&ControlView>, queue: &Arc<str>) -> Self {
        QueueGate {
            pause: control.map(|view| Pause {
                view: view.clone(),
                changes: view.changes(),
            }),
            queue: Arc::clone(queue),
        }
    }

    /// Whether the gate is closed now.
    pub(crate) fn is_closed(&self) -> bool {
        self.pause
            .as_ref()
            .is_some_and(|pause| pause.view.is_paused(&self.queue))
    }

    /// Resolves when the gate closes; never, for a gate that cannot.
    pub(crate) async fn closed(&mut self) {
        let Some(pause) = &mut self.pause else {
            return std::future::pending().await;
        };
        loop {
            if pause.changes.changed().await.is_err() {
                // The view lives as long as this gate holds it; a closed
                // channel cannot happen, but must not spin either.
                return std::future::pending().await;
            }
            if pause.view.is_paused(&self.queue) {
                return;
            }
        }
    }

    /// Waits while the gate is closed; `false` if shutdown came first.
    pub(crate) async fn wait_open(
        &mut self,
        stop: &mut watch::Receiver<bool>,
        handle: &HandleInner,
    ) -> bool {
        let Some(pause) = &mut self.pause else {
            return true;
        };
        if !pause.view.is_paused(&self.queue) {
            return true;
        }
        tracing::info!(queue = %self.queue, "queue paused: taking no deliveries until it is resumed");
        handle.set_paused(&self.queue, true);
        let gauge = metrics::gauge!(QUEUE_PAUSED, "queue" => Arc::clone(&self.queue));
        gauge.set(1.0);
        let resumed = loop {
            tokio::select! {
                biased;
                () = stopped(stop) => break false,
                changed = pause.changes.changed() => {
                    if changed.is_err() || !pause.view.is_paused(&self.queue) {
                        break true;
                    }
                }
            }
        };
        gauge.set(0.0);
        handle.set_paused(&self.queue, false);
        if resumed {
            tracing::info!(queue = %self.queue, "queue resumed: consuming again");
        }
        resumed
    }
}
