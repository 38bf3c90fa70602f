use std::time::Duration;

use queuey_core::{BoxError, Error};

/// Why [`Worker::run`](super::Worker::run) stopped with an error.
///
/// A lost connection is not one of them: the worker consumes again once the
/// backend is back. It stops on what cannot heal, or after its
/// [reconnect deadline](super::WorkerBuilder::reconnect_deadline).
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

    /// The backend gave up on its connection (it reports
    /// [`ConnectionState::Failed`](queuey_core::ConnectionState::Failed):
    /// credentials refused, a virtual host gone, its own reconnection
    /// deadline passed).
    #[error(
        "the backend gave up on its connection while consuming `{queue}`; see its logs for why"
    )]
    BackendFailed {
        /// The queue whose consumer noticed.
        queue: String,
    },

    /// The backend was closed while the worker ran.
    #[error("the backend was closed while consuming `{queue}`")]
    BackendClosed {
        /// The queue whose consumer noticed.
        queue: String,
    },

    /// A lost consumer could not be started again within the
    /// [reconnect deadline](super::WorkerBuilder::reconnect_deadline).
    #[error(
        "the consumer of `{queue}` could not be started again within {waited:?} \
         (the reconnect deadline); last error: {last_error}"
    )]
    ReconnectDeadline {
        /// The queue.
        queue: String,
        /// How long the worker tried.
        waited: Duration,
        /// The last failure seen.
        last_error: String,
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
