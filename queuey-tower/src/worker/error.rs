use queuey_core::{BoxError, Error};

/// Why [`Worker::run`](super::Worker::run) stopped with an error.
///
/// A lost connection is not one: the worker consumes again while the backend
/// reconnects, and stops on what cannot heal, such as a backend that gave up
/// (for RabbitMQ, past `RabbitMqOptions::reconnect_deadline`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Consuming a queue failed with an error that cannot heal (for
    /// example credentials refused, or the queue refused with
    /// `PRECONDITION_FAILED`).
    #[error("could not start consuming `{queue}`: {source}")]
    Consume {
        /// The queue.
        queue: String,
        /// What the backend reported.
        source: Error,
    },

    /// A consumer failed with an error that cannot heal. Jobs in flight were
    /// given the shutdown timeout to finish; whatever was not settled is
    /// redelivered by the broker.
    #[error("the consumer of `{queue}` failed and cannot recover: {source}")]
    ConsumerFailed {
        /// The queue.
        queue: String,
        /// What the backend reported.
        source: Error,
    },

    /// The backend gave up on its connection
    /// ([`ConnectionState::Failed`](queuey_core::backend::ConnectionState::Failed):
    /// credentials refused, a virtual host gone, a deadline passed);
    /// `source` is the error its calls fail with now.
    #[error("the backend gave up on its connection while consuming `{queue}`: {source}")]
    BackendFailed {
        /// The queue whose consumer noticed.
        queue: String,
        /// Why the backend gave up, as it reports it.
        source: Error,
    },

    /// The backend was closed while the worker ran.
    #[error("the backend was closed while consuming `{queue}`")]
    BackendClosed {
        /// The queue whose consumer noticed.
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
