//! What the worker does with its fleet's control commands: staying off a
//! paused queue, dead-lettering a cancelled job instead of running it, and
//! telling a running job that it was cancelled.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use queuey_core::control::{CANCELLED_REASON, CancelSignal, Canceller, ControlView};
use queuey_core::{Disposition, Envelope};
use tokio::sync::watch;

use super::handle::{HandleInner, stopped};
use crate::metrics::{JOBS_CANCELLED_TOTAL, QUEUE_PAUSED};

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

/// What a started job needs to hear of a cancellation while it runs.
pub(crate) struct Watch {
    view: ControlView,
    canceller: Canceller,
}

/// The cancel signal for a job about to start, and what trips it; a worker
/// without control commands hands out a signal that never trips.
pub(crate) fn signal_for(view: Option<&ControlView>) -> (CancelSignal, Option<Watch>) {
    match view {
        Some(view) => {
            let (signal, canceller) = CancelSignal::new();
            (
                signal,
                Some(Watch {
                    view: view.clone(),
                    canceller,
                }),
            )
        }
        None => (CancelSignal::never(), None),
    }
}

/// Whether a delivery's job was cancelled before it started; counts it.
pub(crate) fn cancelled_before_start(
    view: Option<&ControlView>,
    envelope: &Envelope,
    queue: &Arc<str>,
    handle: &HandleInner,
) -> bool {
    let cancelled = view.is_some_and(|view| view.is_cancelled(envelope));
    if cancelled {
        count(queue, handle);
        tracing::info!(%queue, job_id = %envelope.job_id, job_type = %envelope.job_type, "job cancelled: dead-lettering it without running it");
    }
    cancelled
}

fn count(queue: &Arc<str>, handle: &HandleInner) {
    handle.jobs_cancelled.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(JOBS_CANCELLED_TOTAL, "queue" => Arc::clone(queue)).increment(1);
}

/// Runs a started job; when its job is cancelled meanwhile, trips its
/// signal (the handler may stop or not: nothing is killed).
pub(crate) async fn run_watching<F: Future>(
    job: F,
    watch: Option<&Watch>,
    envelope: &Envelope,
) -> F::Output {
    let Some(watch) = watch else {
        return job.await;
    };
    let mut changes = watch.view.changes();
    tokio::pin!(job);
    loop {
        tokio::select! {
            output = &mut job => return output,
            changed = changes.changed(), if !watch.canceller.is_cancelled() => {
                if changed.is_err() {
                    return job.await;
                }
                if watch.view.is_cancelled(envelope) {
                    tracing::info!(queue = %envelope.queue, job_id = %envelope.job_id, "job cancelled while it runs: telling its handler");
                    watch.canceller.cancel();
                }
            }
        }
    }
}

/// The final disposition of a job that ran: a job cancelled while it ran
/// and not completed by its handler is dead-lettered as cancelled instead
/// of being retried or deferred.
pub(crate) fn after_run(
    disposition: Disposition,
    watch: Option<&Watch>,
    queue: &Arc<str>,
    handle: &HandleInner,
) -> Disposition {
    let cancelled = watch.is_some_and(|w| w.canceller.is_cancelled());
    match disposition {
        Disposition::Ack | Disposition::Requeue => disposition,
        _ if cancelled => {
            count(queue, handle);
            Disposition::DeadLetter {
                reason: CANCELLED_REASON.to_owned(),
            }
        }
        other => other,
    }
}
