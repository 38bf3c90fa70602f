//! The job a log line is about: its queue, job type and id, carried by every
//! retry, deferral, dead-letter, deadline and cancellation line as fields of
//! the event itself, so the line names its job at any log filter.

use std::sync::Arc;

use queuey_core::Uuid;
use tracing::Level;
use tracing::field::{DisplayValue, display};

use crate::JobRequest;

/// Which job a layer's log lines are about, kept by its response future.
/// Cheap to take: the queue name is shared, the job type static.
#[derive(Debug, Clone)]
pub(crate) struct JobFields {
    pub(crate) queue: Arc<str>,
    job_type: Option<&'static str>,
    pub(crate) job_id: Uuid,
}

impl JobFields {
    /// The fields of `request`'s job; its type is named when the worker
    /// built the request (one built by hand has no `job_type` field).
    pub(crate) fn of<J>(request: &JobRequest<J>) -> Self {
        let ctx = request.ctx();
        JobFields {
            queue: Arc::clone(ctx.queue_arc()),
            job_type: request.job_type(),
            job_id: ctx.job_id(),
        }
    }

    /// The fields of `request`'s job for lines at `level`, kept only if
    /// such a line could be recorded (nothing listens: nothing is copied).
    pub(crate) fn if_recorded<J>(request: &JobRequest<J>, level: Level) -> Option<Self> {
        tracing::level_enabled!(level).then(|| JobFields::of(request))
    }

    /// The `job_type` field: absent when the type is unknown.
    pub(crate) fn job_type(&self) -> Option<DisplayValue<&'static str>> {
        self.job_type.map(display)
    }
}
