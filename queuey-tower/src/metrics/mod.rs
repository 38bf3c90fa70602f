//! Job metrics through the [`metrics`] crate.
//!
//! [`MetricsLayer`] records, for every job it sees:
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_jobs_total` | counter | `queue`, `job_type`, `disposition` | jobs finished, by what happens next: `ack`, `retry`, `defer`, `dead_letter`, or `error` when an error reached the layer |
//! | `queuey_job_duration_seconds` | histogram | `queue`, `job_type` | time from the call to the answer, everything inside the layer included |
//! | `queuey_jobs_in_flight` | gauge | `queue`, `job_type` | jobs currently inside the layer |
//!
//! The worker adds, whatever its stack:
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_settle_failures_total` | counter | `queue` | dispositions it could not carry out on the broker, stale settles included |
//! | `queuey_jobs_settling` | gauge | `queue` | jobs whose outcome is being carried out on the broker |
//! | `queuey_queues_reconnecting` | gauge | – | queues whose consumer was lost and is being started again |
//! | `queuey_consumer_restarts_total` | counter | `queue` | consumers started again after a loss |
//!
//! A stale settle (the delivery's connection was gone) is the backend's to
//! count (RabbitMQ: `queuey_rabbitmq_stale_settles_total`), and shows on
//! [`WorkerHandle::stale_settles`](crate::WorkerHandle::stale_settles).
//!
//! Nothing is recorded until the application installs a recorder (say, a
//! Prometheus exporter); without one the layer costs nanoseconds per job.
//! Outside the retry and dead-letter layers (as in the default stack), the
//! `disposition` label is each delivery's final outcome.

pub mod future;
mod keys;

use queuey_core::{BoxError, Disposition, Job};
use tower_service::Service;

use crate::JobRequest;

/// Counter of finished jobs.
pub const JOBS_TOTAL: &str = "queuey_jobs_total";
/// Histogram of job durations, in seconds.
pub const JOB_DURATION_SECONDS: &str = "queuey_job_duration_seconds";
/// Gauge of jobs in flight.
pub const JOBS_IN_FLIGHT: &str = "queuey_jobs_in_flight";
/// Counter of dispositions the worker failed to carry out.
pub const SETTLE_FAILURES_TOTAL: &str = "queuey_settle_failures_total";
/// Gauge of jobs whose outcome is being carried out on the broker.
pub const JOBS_SETTLING: &str = "queuey_jobs_settling";
/// Gauge of queues whose consumer is being started again.
pub const QUEUES_RECONNECTING: &str = "queuey_queues_reconnecting";
/// Counter of consumers started again after a loss.
pub const CONSUMER_RESTARTS_TOTAL: &str = "queuey_consumer_restarts_total";
/// Counter of cancelled jobs the worker dead-lettered instead of running or
/// retrying them.
pub const JOBS_CANCELLED_TOTAL: &str = "queuey_jobs_cancelled_total";
/// Gauge: 1 while the worker stays off a queue because it is paused.
pub const QUEUE_PAUSED: &str = "queuey_queue_paused";

crate::plain_layer! {
    /// Records job metrics; see the [module documentation](self).
    pub struct MetricsLayer;

    /// The service [`MetricsLayer`] produces.
    pub struct Metrics<S> {
        /// The keys of the queue and job type last seen: a worker's stack
        /// serves one queue, so they are built once.
        keys: keys::KeyCache,
    }
}

impl<S, J> Service<JobRequest<J>> for Metrics<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
    J: Job,
{
    crate::disposition_service!(future::ResponseFuture<S::Future>);

    fn call(&mut self, request: JobRequest<J>) -> Self::Future {
        let keys = self.keys.get(request.ctx().queue_arc(), J::NAME);
        future::ResponseFuture::new(self.inner.call(request), keys)
    }
}
