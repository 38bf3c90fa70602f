//! The error type shared by producers and backends.

use crate::envelope::DecodeError;
use uuid::Uuid;

/// A type-erased error, as tower uses for service errors.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong while talking to a backend or preparing a job for it.
///
/// The enum is `#[non_exhaustive]`: match the variants you act on and keep a
/// wildcard arm for the rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A retry, delayed enqueue or deferral named a queue this backend has not
    /// declared (holds dead-letter back onto it, so the backend must know its
    /// configuration). `Producer::new` and `WorkerBuilder::build` declare.
    #[error(
        "queue `{queue}` was not declared through this backend in this process; \
         declare the queue set (Producer::new or WorkerBuilder::build) before \
         retrying, delaying or deferring jobs onto it"
    )]
    UnknownQueue {
        /// The queue that was named.
        queue: String,
    },

    /// The backend or broker refused or failed an operation. The message is
    /// the backend's own, for example
    /// ``broker returned the message published to `q` as unroutable: 312 NO_ROUTE``.
    #[error(transparent)]
    Backend(#[from] BackendError),

    /// A message body is not a valid [`Envelope`](crate::Envelope).
    #[error("could not decode the job envelope: {0}")]
    Decode(#[from] DecodeError),

    /// A job could not be serialized to JSON.
    #[error("could not encode a job for queue `{queue}` as JSON: {source}")]
    Encode {
        /// The queue the job was meant for.
        queue: String,
        /// What serde_json reported.
        source: serde_json::Error,
    },

    /// A delay, rounded up to the backend's granularity, is longer than a
    /// hold can keep; refused rather than clamped, as a hold never releases
    /// a job early.
    #[error(
        "a delay of {delay_ms} ms for queue `{queue}` is over the maximum of \
         {max_ms} ms (about 24.8 days); the hold is refused rather than released early"
    )]
    DelayTooLong {
        /// The queue the job was meant for.
        queue: String,
        /// The delay asked for, in milliseconds, after rounding up.
        delay_ms: u128,
        /// The largest delay a hold accepts, [`MAX_DEFERRAL_MS`](crate::MAX_DEFERRAL_MS).
        max_ms: u64,
    },

    /// A message body is larger than the backend accepts.
    #[error(
        "a message for queue `{queue}` is {size} bytes, over the {limit}-byte limit; \
         keep large payloads elsewhere and enqueue a reference to them"
    )]
    MessageTooLarge {
        /// The queue the message was meant for.
        queue: String,
        /// The encoded size in bytes.
        size: usize,
        /// The backend's limit in bytes.
        limit: usize,
    },

    /// A configuration value is out of range or inconsistent; the message says
    /// which one and what to change.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// The backend was closed; no further operation is possible.
    #[error("the backend has been shut down")]
    ShutDown,

    /// A unique job with the same key is waiting already (or running, or
    /// held for a retry), so this one was not enqueued.
    #[error(
        "a job with the same uniqueness key is already enqueued (job {existing_id}); \
         this one was not enqueued"
    )]
    Duplicate {
        /// The id of the job that holds the key.
        existing_id: Uuid,
    },
}

impl Error {
    /// Shorthand for an [`Error::InvalidConfig`] with the given message.
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Error::InvalidConfig(message.into())
    }

    /// Whether the connection to the broker is gone (or the backend was shut
    /// down): nothing on that connection will succeed again, though a
    /// reconnecting backend may later (see [`Error::is_transient`]).
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Error::Backend(e) if e.kind() == BackendErrorKind::ConnectionLost)
            || matches!(self, Error::ShutDown)
    }

    /// Whether the same call may succeed if tried again later: the
    /// connection was lost (a reconnecting backend heals), a call ran past
    /// its bound, or a publish's outcome is unknown. Refusals, bad input,
    /// bad configuration and a closed backend are not transient.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Backend(e) if e.kind().is_transient())
    }
}

/// What kind of failure a [`BackendError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// The broker answered a publish with a negative confirmation.
    Nacked,
    /// The broker returned a mandatory publish because no queue matched.
    Unroutable,
    /// A publish could not be confirmed because confirms were not enabled.
    ConfirmsNotEnabled,
    /// The broker refused an operation (for example `PRECONDITION_FAILED`
    /// on a declaration whose arguments differ from the existing queue's).
    Refused,
    /// The connection is gone; nothing on it will succeed again. A backend
    /// that reconnects answers later calls on its next connection.
    ConnectionLost,
    /// The connection was lost before the broker confirmed a sent message,
    /// which it may or may not hold. Publishing it again (same id) is safe
    /// and at worst duplicates it.
    Uncertain,
    /// A broker call did not finish within its bound (a silent partition, a
    /// resource alarm blocking publishers, a reconnection too slow).
    TimedOut,
    /// A settle was attempted on a delivery whose channel is gone, or that was
    /// already settled.
    NotSettled,
    /// Anything else.
    Other,
}

impl BackendErrorKind {
    /// Whether a later try of the same call may succeed:
    /// [`ConnectionLost`](Self::ConnectionLost), [`Uncertain`](Self::Uncertain)
    /// and [`TimedOut`](Self::TimedOut).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            BackendErrorKind::ConnectionLost
                | BackendErrorKind::Uncertain
                | BackendErrorKind::TimedOut
        )
    }
}

/// A failure reported by a backend, with a message that names the queue and
/// the cause.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    kind: BackendErrorKind,
    message: String,
    #[source]
    source: Option<BoxError>,
}

impl BackendError {
    /// A new error of the given kind with the given message.
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        BackendError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the underlying error, reachable through
    /// [`std::error::Error::source`].
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }

    /// The message, without the source.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The innermost error's text: an HTTP client wraps "connection refused"
/// several sources deep, under messages that say less.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_error_displays_its_message_only() {
        let e = BackendError::new(
            BackendErrorKind::Unroutable,
            "broker returned the message published to `q` as unroutable: 312 NO_ROUTE",
        )
        .with_source(std::io::Error::other("inner"));
        let outer = Error::from(e);
        assert_eq!(
            outer.to_string(),
            "broker returned the message published to `q` as unroutable: 312 NO_ROUTE"
        );
        let source = std::error::Error::source(&outer).map(|s| s.to_string());
        assert_eq!(source.as_deref(), Some("inner"));
    }

    #[test]
    fn messages_name_the_queue_and_the_fix() {
        let e = Error::UnknownQueue {
            queue: "app.emails".into(),
        };
        let text = e.to_string();
        assert!(text.contains("`app.emails`"), "{text}");
        assert!(text.contains("Producer::new"), "{text}");

        let e = Error::DelayTooLong {
            queue: "q".into(),
            delay_ms: 3_000_000_000,
            max_ms: crate::MAX_DEFERRAL_MS,
        };
        assert!(e.to_string().contains("2147483647"), "{e}");
    }

    #[test]
    fn connection_loss_is_recognised() {
        let lost = Error::from(BackendError::new(BackendErrorKind::ConnectionLost, "gone"));
        assert!(lost.is_connection_lost());
        assert!(Error::ShutDown.is_connection_lost());
        let refused = Error::from(BackendError::new(BackendErrorKind::Refused, "no"));
        assert!(!refused.is_connection_lost());
    }

    #[test]
    fn transient_errors_are_the_ones_worth_trying_again() {
        for kind in [
            BackendErrorKind::ConnectionLost,
            BackendErrorKind::Uncertain,
            BackendErrorKind::TimedOut,
        ] {
            assert!(
                Error::from(BackendError::new(kind, "x")).is_transient(),
                "{kind:?}"
            );
        }
        for kind in [
            BackendErrorKind::Refused,
            BackendErrorKind::Nacked,
            BackendErrorKind::Unroutable,
            BackendErrorKind::NotSettled,
            BackendErrorKind::Other,
        ] {
            assert!(
                !Error::from(BackendError::new(kind, "x")).is_transient(),
                "{kind:?}"
            );
        }
        assert!(!Error::ShutDown.is_transient());
        assert!(!Error::invalid_config("x").is_transient());
    }

    #[test]
    fn error_is_send_sync_static() {
        fn assert_bounds<T: Send + Sync + 'static>() {}
        assert_bounds::<Error>();
    }
}
