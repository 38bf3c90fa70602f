//! Turning lapin's errors and confirmations into queuey's [`Error`].

use lapin::ErrorKind;
use lapin::protocol::AMQPErrorKind;
use queuey_core::{BackendError, BackendErrorKind, Error};

/// AMQP reply codes this backend treats specially.
pub(crate) mod code {
    /// The user lacks the permission the operation needs.
    pub(crate) const ACCESS_REFUSED: u16 = 403;
    /// The resource does not exist.
    pub(crate) const NOT_FOUND: u16 = 404;
    /// The arguments differ from the existing object's.
    pub(crate) const PRECONDITION_FAILED: u16 = 406;
    /// The broker failed internally; RabbitMQ 4.3 answers a transient queue
    /// declaration with it.
    pub(crate) const INTERNAL_ERROR: u16 = 541;
}

/// A lapin error as queuey sees it: the AMQP reply code (if the broker sent
/// one) and whether the connection is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) reply_code: Option<u16>,
    pub(crate) connection_lost: bool,
    pub(crate) text: String,
}

impl Failure {
    /// Classifies `error`; `connection_alive` is the connection's state right
    /// after the failure.
    pub(crate) fn of(error: &lapin::Error, connection_alive: bool) -> Self {
        let (reply_code, hard) = match error.kind() {
            ErrorKind::ProtocolError(amqp) => (
                Some(amqp.get_id()),
                matches!(amqp.kind(), AMQPErrorKind::Hard(_)),
            ),
            ErrorKind::IOError(_)
            | ErrorKind::RuntimeShutdownError(_)
            | ErrorKind::InvalidConnectionState(_)
            | ErrorKind::MissingHeartbeatError => (None, true),
            _ => (None, false),
        };
        Failure {
            reply_code,
            connection_lost: hard || !connection_alive,
            text: error.to_string(),
        }
    }

    /// This failure with `hint`, what to do about it, after the broker's
    /// text (an empty hint adds nothing).
    pub(crate) fn hinted(self, hint: &str) -> Self {
        if hint.is_empty() {
            return self;
        }
        let text = format!("{}; {hint}", self.text);
        Failure { text, ..self }
    }

    /// The queuey error for this failure while doing `what`.
    pub(crate) fn into_error(self, what: &str) -> Error {
        if self.connection_lost {
            let message = format!("{what}: the connection to RabbitMQ is lost ({})", self.text);
            return backend(BackendErrorKind::ConnectionLost, message);
        }
        let kind = match self.reply_code {
            Some(code::PRECONDITION_FAILED | code::NOT_FOUND | 403 | 405) => {
                BackendErrorKind::Refused
            }
            _ => BackendErrorKind::Other,
        };
        backend(kind, format!("{what}: {}", self.text))
    }
}

/// A backend error of `kind` saying `message`.
pub(crate) fn backend(kind: BackendErrorKind, message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(kind, message))
}

/// Refuses a body of `size` bytes for `queue` with
/// [`Error::MessageTooLarge`] when it is over `limit`.
pub(crate) fn check_size(queue: &str, size: usize, limit: usize) -> Result<(), Error> {
    if size > limit {
        let queue = queue.to_owned();
        return Err(Error::MessageTooLarge { queue, size, limit });
    }
    Ok(())
}

/// Whether lapin refused a call before sending anything: its channel or
/// its connection was not open.
pub(crate) fn never_sent(error: &lapin::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::InvalidChannelState(..) | ErrorKind::InvalidConnectionState(_)
    )
}

/// The error for an operation attempted after the connection died.
pub(crate) fn connection_lost(what: &str) -> Error {
    let text = format!(
        "{what}: the connection to RabbitMQ is lost; the backend is connecting \
         again, so the call can be tried again"
    );
    backend(BackendErrorKind::ConnectionLost, text)
}

/// What a publisher confirm said, free of lapin types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Confirmed {
    /// A bare ack: the broker holds the message.
    Ack,
    /// A negative confirmation with nothing returned.
    Nack,
    /// The broker returned a message (acked or nacked afterwards).
    Returned {
        message_id: Option<String>,
        reply_code: u16,
        reply_text: String,
    },
    /// The channel was not in confirm mode.
    NotRequested,
}

/// The outcome of a publish of `own_id` to `queue`, given its confirmation.
pub(crate) fn confirm_outcome(
    queue: &str,
    own_id: &str,
    confirmed: Confirmed,
) -> Result<(), Error> {
    let (kind, message) = match confirmed {
        Confirmed::Ack => return Ok(()),
        Confirmed::Nack => (
            BackendErrorKind::Nacked,
            format!("broker nacked the message published to `{queue}`"),
        ),
        Confirmed::NotRequested => (
            BackendErrorKind::ConfirmsNotEnabled,
            format!("publisher confirms are not enabled; cannot confirm publish to `{queue}`"),
        ),
        Confirmed::Returned {
            message_id,
            reply_code,
            reply_text,
        } if message_id.as_deref() == Some(own_id) => (
            BackendErrorKind::Unroutable,
            format!(
                "broker returned the message published to `{queue}` as unroutable: {reply_code} {reply_text}"
            ),
        ),
        Confirmed::Returned {
            message_id,
            reply_code,
            reply_text,
        } => {
            // One publish per channel at a time makes this impossible; if it
            // ever shows up, the outcome of our own publish is unknown.
            let other = message_id.as_deref().unwrap_or("<none>");
            tracing::error!(
                queue,
                own_message_id = own_id,
                returned_message_id = other,
                reply_code,
                "a publisher confirm carried another message's return; outcome unknown"
            );
            (
                BackendErrorKind::Other,
                format!(
                    "the confirm of message `{own_id}` published to `{queue}` carried the return of \
                     message `{other}` ({reply_code} {reply_text}); the publish's outcome is unknown"
                ),
            )
        }
    };
    Err(backend(kind, message))
}

/// `error` with what to do about it when it is the broker returning a job
/// published to the work queue `queue` as unroutable (`312 NO_ROUTE`): no
/// queue of that name exists (or, through the job `exchange`, none is
/// bound to it under that name). `declared` says whether this backend
/// declared it, in which case it was deleted since. Any other error is
/// returned as it is.
pub(crate) fn with_no_route_hint(
    error: Error,
    queue: &str,
    declared: bool,
    exchange: Option<&str>,
) -> Error {
    match error {
        Error::Backend(e) if e.kind() == BackendErrorKind::Unroutable => {
            let text = match exchange {
                Some(exchange) => format!(
                    "{}; no queue `{queue}` is bound to the job exchange `{exchange}`: the \
                     queue was never declared with `job_exchange(\"{exchange}\")` in the \
                     options (`Producer::new`, `WorkerBuilder::build` and `Backend::declare` \
                     declare and bind it), or it has been deleted since",
                    e.message()
                ),
                None => {
                    let hint = if declared {
                        "it was declared through this backend and has been deleted since; \
                         `Backend::declare` (or restarting the producer or worker) declares it \
                         again"
                    } else {
                        "it was never declared (`Producer::new`, `WorkerBuilder::build` and \
                         `Backend::declare` declare it; `Producer::new_undeclared` does not)"
                    };
                    format!(
                        "{}; the queue `{queue}` does not exist: {hint}",
                        e.message()
                    )
                }
            };
            backend(BackendErrorKind::Unroutable, text)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(e: &Error) -> BackendErrorKind {
        match e {
            Error::Backend(b) => b.kind(),
            other => panic!("not a backend error: {other:?}"),
        }
    }

    #[test]
    fn the_three_documented_messages() {
        let e = confirm_outcome("myapp.emails", "id", Confirmed::Nack).unwrap_err();
        assert_eq!(
            e.to_string(),
            "broker nacked the message published to `myapp.emails`"
        );
        assert_eq!(kind(&e), BackendErrorKind::Nacked);

        let returned = Confirmed::Returned {
            message_id: Some("id".into()),
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        };
        let e = confirm_outcome("myapp.emails", "id", returned).unwrap_err();
        assert_eq!(
            e.to_string(),
            "broker returned the message published to `myapp.emails` as unroutable: 312 NO_ROUTE"
        );
        assert_eq!(kind(&e), BackendErrorKind::Unroutable);

        let e = confirm_outcome("myapp.emails", "id", Confirmed::NotRequested).unwrap_err();
        assert_eq!(
            e.to_string(),
            "publisher confirms are not enabled; cannot confirm publish to `myapp.emails`"
        );
        assert_eq!(kind(&e), BackendErrorKind::ConfirmsNotEnabled);

        assert!(confirm_outcome("q", "id", Confirmed::Ack).is_ok());
    }

    #[test]
    fn a_job_the_job_exchange_could_not_route_names_the_exchange() {
        let returned = Confirmed::Returned {
            message_id: Some("id".into()),
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        };
        let e = confirm_outcome("app.q", "id", returned).unwrap_err();
        let text = with_no_route_hint(e, "app.q", true, Some("app.jobs")).to_string();
        assert!(
            text.contains("no queue `app.q` is bound to the job exchange `app.jobs`"),
            "{text}"
        );
        assert!(text.contains("job_exchange(\"app.jobs\")"), "{text}");
    }

    #[test]
    fn a_publish_to_a_missing_work_queue_says_it_was_never_declared() {
        let returned = Confirmed::Returned {
            message_id: Some("id".into()),
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        };
        let returned_text = "broker returned the message published to `myapp.emails` as unroutable: \
                    312 NO_ROUTE";
        let e = confirm_outcome("myapp.emails", "id", returned.clone()).unwrap_err();
        let e = with_no_route_hint(e, "myapp.emails", false, None);
        assert_eq!(kind(&e), BackendErrorKind::Unroutable);
        let text = e.to_string();
        assert!(text.starts_with(returned_text), "{text}");
        assert!(
            text.contains("the queue `myapp.emails` does not exist: it was never declared"),
            "{text}"
        );
        for name in [
            "`Producer::new`",
            "`WorkerBuilder::build`",
            "`Backend::declare`",
            "`Producer::new_undeclared` does not",
        ] {
            assert!(text.contains(name), "{name} missing: {text}");
        }

        // Declared by this backend, deleted since: the hint says so.
        let e = confirm_outcome("myapp.emails", "id", returned).unwrap_err();
        let text = with_no_route_hint(e, "myapp.emails", true, None).to_string();
        assert!(text.starts_with(returned_text), "{text}");
        assert!(text.contains("deleted since"), "{text}");
        assert!(!text.contains("never declared"), "{text}");

        // Anything else is left as it is.
        let nacked = confirm_outcome("q", "id", Confirmed::Nack).unwrap_err();
        assert_eq!(
            with_no_route_hint(nacked, "q", false, None).to_string(),
            "broker nacked the message published to `q`"
        );
    }

    #[test]
    fn another_messages_return_is_an_alarm_not_a_success() {
        let returned = Confirmed::Returned {
            message_id: Some("someone-else".into()),
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        };
        let e = confirm_outcome("q", "mine", returned).unwrap_err();
        assert_eq!(kind(&e), BackendErrorKind::Other);
        assert!(e.to_string().contains("someone-else"), "{e}");
        let anonymous = Confirmed::Returned {
            message_id: None,
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        };
        assert!(confirm_outcome("q", "mine", anonymous).is_err());
    }

    #[test]
    fn failures_map_to_kinds() {
        let refused = Failure {
            reply_code: Some(code::PRECONDITION_FAILED),
            connection_lost: false,
            text: "PRECONDITION_FAILED - inequivalent arg".into(),
        };
        let e = refused.into_error("declaring `q`");
        assert_eq!(kind(&e), BackendErrorKind::Refused);
        assert_eq!(
            e.to_string(),
            "declaring `q`: PRECONDITION_FAILED - inequivalent arg"
        );

        let lost = Failure {
            reply_code: Some(320),
            connection_lost: true,
            text: "CONNECTION_FORCED".into(),
        };
        let e = lost.into_error("publishing to `q`");
        assert_eq!(kind(&e), BackendErrorKind::ConnectionLost);
        assert!(e.is_connection_lost());

        let other = Failure {
            reply_code: None,
            connection_lost: false,
            text: "x".into(),
        };
        assert_eq!(kind(&other.into_error("y")), BackendErrorKind::Other);
        assert_eq!(
            kind(&connection_lost("z")),
            BackendErrorKind::ConnectionLost
        );
    }

    #[test]
    fn lapin_errors_are_classified() {
        let io = lapin::Error::from(std::io::Error::other("reset"));
        assert!(Failure::of(&io, true).connection_lost);
        let channel = lapin::Error::from(ErrorKind::InvalidChannelState(
            lapin::ChannelState::Closed,
            "basic.publish",
        ));
        assert!(!Failure::of(&channel, true).connection_lost);
        assert!(Failure::of(&channel, false).connection_lost);
    }
}
