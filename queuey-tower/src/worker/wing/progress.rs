//! Job progress: a job someone can see gets a reporter in its context; the
//! heartbeats show its latest report (the ledger reads it), and a caller
//! waiting for the job receives each report as it is made.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::Envelope;
use queuey_core::backend::{Backend, Reply};
use queuey_core::control::{ProgressReporter, ProgressUpdates};

use super::{Extras, Starting, Wing};

/// The least time between two reports sent to a waiting caller: a handler
/// reporting in a tight loop sends its latest report at this pace, not a
/// flood of messages.
const SEND_PACE: Duration = Duration::from_millis(100);

/// The progress wing.
pub(crate) struct ProgressWing {
    /// Whether the worker's heartbeats show running jobs.
    heartbeats: bool,
    /// Where reports go to a waiting caller, if it carries replies.
    backend: Arc<dyn Backend>,
}

impl ProgressWing {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        let heartbeats = backend.capabilities().heartbeats().is_some();
        ProgressWing {
            heartbeats,
            backend,
        }
    }
}

impl Wing for ProgressWing {
    /// The job's reports as they are made, for a caller that waits.
    type Job = Option<ProgressUpdates>;

    fn start(&self, job: &Starting<'_>, extras: &mut Extras) -> Self::Job {
        if job.refused || job.job_type.is_none() {
            return None;
        }
        let replies = self.backend.capabilities().replies().is_some();
        let watched = job.envelope.reply_to.is_some() && replies;
        if !(watched || self.heartbeats) {
            // Nobody can see this job's progress: its reports cost nothing.
            return None;
        }
        let (reporter, updates) = ProgressReporter::channel();
        extras.progress = Some(reporter);
        watched.then_some(updates)
    }

    async fn beside(&self, updates: &Self::Job, envelope: &Envelope) {
        let capabilities = self.backend.capabilities();
        let (Some(replies), Some(to), Some(updates)) =
            (capabilities.replies(), &envelope.reply_to, updates)
        else {
            return std::future::pending().await;
        };
        // A clone has seen what the original saw: no report is sent twice.
        let mut updates = updates.clone();
        while let Some(progress) = updates.next().await {
            if let Err(error) = replies.reply(to, Reply::Progress(progress)).await {
                tracing::debug!(
                    queue = %envelope.queue,
                    job_id = %envelope.job_id,
                    %error,
                    "could not send a progress report to the caller waiting for the job"
                );
            }
            tokio::time::sleep(SEND_PACE).await;
        }
        std::future::pending().await
    }
}
