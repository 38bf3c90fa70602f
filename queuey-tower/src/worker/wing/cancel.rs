//! Cancelled jobs: one cancelled before it starts is dead-lettered unrun; a
//! running one is told through its cancel signal and, unless it completes,
//! dead-lettered as cancelled, not retried or deferred. Nothing is killed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use queuey_core::control::{CANCELLED_REASON, CancelSignal, Canceller, ControlView};
use queuey_core::escape::Untrusted;
use queuey_core::{Disposition, Envelope};

use super::{Ended, Extras, Starting, Wing};
use crate::metrics::JOBS_CANCELLED_TOTAL;
use crate::worker::handle::HandleInner;

/// The cancel wing: active when the worker follows control commands.
pub(crate) struct CancelWing {
    pub(super) view: Option<ControlView>,
    pub(super) handle: Arc<HandleInner>,
}

impl CancelWing {
    fn count(&self, queue: &Arc<str>) {
        self.handle.jobs_cancelled.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(JOBS_CANCELLED_TOTAL, "queue" => Arc::clone(queue)).increment(1);
    }
}

impl Wing for CancelWing {
    /// What trips the job's signal; `None` without control commands, whose
    /// jobs get a signal that never trips.
    type Job = Option<Canceller>;

    fn refuses(&self, job: &Starting<'_>) -> Option<String> {
        let view = self.view.as_ref()?;
        if !view.is_cancelled(job.envelope) {
            return None;
        }
        self.count(job.queue);
        tracing::info!(
            queue = %job.queue,
            job_type = %Untrusted(&job.envelope.job_type),
            job_id = %job.envelope.job_id,
            "job cancelled: dead-lettering it without running it"
        );
        Some(CANCELLED_REASON.to_owned())
    }

    fn start(&self, _job: &Starting<'_>, extras: &mut Extras) -> Self::Job {
        self.view.as_ref()?;
        let (signal, canceller) = CancelSignal::new();
        extras.cancel = Some(signal);
        Some(canceller)
    }

    async fn beside(&self, canceller: &Self::Job, envelope: &Envelope) {
        let (Some(view), Some(canceller)) = (&self.view, canceller) else {
            return std::future::pending().await;
        };
        let mut changes = view.changes();
        // The view lives as long as the worker; a closed channel cannot
        // happen, but must not spin either.
        while changes.changed().await.is_ok() {
            if view.is_cancelled(envelope) {
                tracing::info!(
                    queue = %envelope.queue,
                    job_type = %Untrusted(&envelope.job_type),
                    job_id = %envelope.job_id,
                    "job cancelled while it runs: telling its handler"
                );
                canceller.cancel();
                break;
            }
        }
        std::future::pending().await
    }

    fn run_ended(
        &self,
        canceller: &mut Self::Job,
        disposition: Disposition,
        job: &mut Ended<'_>,
    ) -> Disposition {
        let cancelled = canceller.as_ref().is_some_and(Canceller::is_cancelled);
        match disposition {
            Disposition::Ack | Disposition::Requeue => disposition,
            _ if cancelled => {
                self.count(job.queue);
                Disposition::DeadLetter {
                    reason: CANCELLED_REASON.to_owned(),
                }
            }
            other => other,
        }
    }
}
