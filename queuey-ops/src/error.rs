//! The one error type of every operation.

use std::path::PathBuf;

/// What went wrong in an operation, with a message an operator can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OpsError {
    /// The AMQP connection could not be opened: what went wrong (it names
    /// the URL, password masked).
    #[error("cannot connect to the broker: {0}")]
    Connect(#[source] queuey_core::Error),
    /// An AMQP call failed.
    #[error("{what}: {source}")]
    Amqp {
        what: String,
        #[source]
        source: lapin::Error,
    },
    /// The queue does not exist on the broker.
    #[error("queue `{0}` does not exist on the broker (check the name and the vhost)")]
    UnknownQueue(String),
    /// No dead letter with this id.
    #[error("no dead letter `{id}` in {queue} (ids are job ids, message ids or #position)")]
    NotFound {
        /// The dead-letter queue searched (a sharded queue's: the lane's,
        /// and how many shards' were searched besides).
        queue: String,
        id: String,
    },
    /// The management HTTP API cannot be reached.
    #[error(
        "the RabbitMQ management API is not reachable at {url} ({detail}); enable it on the \
         broker with `rabbitmq-plugins enable rabbitmq_management`, or point --mgmt-url at it"
    )]
    ManagementMissing { url: String, detail: String },
    /// The management API answered with an error.
    #[error("the management API answered {status} for {path}: {body}")]
    Management {
        status: u16,
        path: String,
        /// The start of the answer.
        body: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An import file is not a complete export.
    #[error("{path}, line {line}: {detail}; nothing was imported")]
    BadImport {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    /// A control command or a heartbeat could not be sent or read.
    #[error("{what}: {source}")]
    Fleet {
        what: String,
        /// What the backend reported (without a password).
        #[source]
        source: queuey_core::Error,
    },
    /// The broker refused or returned a message; the operation stopped.
    #[error("{0}")]
    Refused(String),
    /// An argument or a configuration value is not usable.
    #[error("{0}")]
    Invalid(String),
}

impl OpsError {
    pub(crate) fn amqp(what: impl Into<String>, source: lapin::Error) -> Self {
        OpsError::Amqp {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn fleet(what: impl Into<String>, source: queuey_core::Error) -> Self {
        OpsError::Fleet {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        OpsError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The result of an operation.
pub(crate) type Result<T, E = OpsError> = std::result::Result<T, E>;
