use queuey_core::{BoxError, Error};

/// Why [`Worker::run`](super::Worker::run) stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Starting a consumer failed.
    #[error("could not start consuming `{queue}`: {source}")]
    Consume {
        /// The queue.
        queue: String,
        /// What the backend reported.
        source: Error,
    },

    /// A consumer failed, typically because the connection dropped. Jobs in
    /// flight were given the shutdown timeout to finish; whatever was not
    /// settled is redelivered by the broker. Restart the process (or build a
    /// new worker on a new backend).
    #[error("the consumer of `{queue}` failed: {source}")]
    ConsumerFailed {
        /// The queue.
        queue: String,
        /// What the backend reported.
        source: Error,
    },

    /// A consumer ended without being asked to, for example because its
    /// queue was deleted.
    #[error("the consumer of `{queue}` was cancelled by the broker (was the queue deleted?)")]
    ConsumerCancelled {
        /// The queue.
        queue: String,
    },

    /// A service stack reported that it can no longer take jobs (its
    /// `poll_ready` failed).
    #[error("the stack for job type `{job_type}` failed: {source}")]
    Service {
        /// The job type whose stack failed.
        job_type: String,
        /// The stack's error.
        source: BoxError,
    },
}
