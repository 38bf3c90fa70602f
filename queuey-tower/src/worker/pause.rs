//! Paused queues: a queue loop takes no delivery of a paused queue, and
//! waits until it is resumed. (Cancelled jobs are a wing of their own.)

use std::sync::Arc;

use queuey_core::control::ControlView;
use tokio::sync::watch;

use super::handle::{HandleInner, stopped};
use crate::metrics::QUEUE_PAUSED;

/// One queue loop's view of the control state.
pub(crate) struct QueueControl {
    view: ControlView,
    changes: watch::Receiver<u64>,
    queue: Arc<str>,
}

impl QueueControl {
    pub(crate) fn new(view: &ControlView, queue: &Arc<str>) -> Self {
        QueueControl {
            view: view.clone(),
            changes: view.changes(),
            queue: Arc::clone(queue),
        }
    }

    /// Whether the queue is paused now.
    pub(crate) fn is_paused(&self) -> bool {
        self.view.is_paused(&self.queue)
    }

    /// Resolves at the next change of the control state that leaves the
    /// queue paused. Every other change is taken in and waited past.
    pub(crate) async fn paused(&mut self) {
        loop {
            if self.changes.changed().await.is_err() {
                // The view lives as long as this loop holds it; a closed
                // channel cannot happen, but must not spin either.
                return std::future::pending().await;
            }
            if self.is_paused() {
                return;
            }
        }
    }

    /// Waits while the queue is paused; `false` if shutdown came first.
    pub(crate) async fn wait_resumed(
        &mut self,
        stop: &mut watch::Receiver<bool>,
        handle: &HandleInner,
    ) -> bool {
        if !self.is_paused() {
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
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        break true;
                    }
                    if !self.is_paused() {
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
