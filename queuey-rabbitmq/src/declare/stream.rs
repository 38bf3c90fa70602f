//! Declaring the control stream and its heartbeat stream, and what a
//! refusal tells the user to do.

use lapin::Connection;
use queuey_core::Error;

use super::declare_on_fresh_channel;
use crate::error::{Failure, code};
use crate::topology;

/// Which of the two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// The control stream: [`topology::control_stream_arguments`].
    Control,
    /// A control stream's heartbeat stream:
    /// [`topology::heartbeat_stream_arguments`].
    Heartbeats,
}

impl Stream {
    /// What the stream is, in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stream::Control => "control stream",
            Stream::Heartbeats => "heartbeat stream",
        }
    }
}

/// Declares `stream` as a stream of `kind` on a fresh channel that is
/// closed afterwards.
pub(crate) async fn declare_stream(
    connection: &Connection,
    stream: &str,
    kind: Stream,
) -> Result<(), Error> {
    let args = match kind {
        Stream::Control => topology::control_stream_arguments(),
        Stream::Heartbeats => topology::heartbeat_stream_arguments(),
    };
    let failure = match declare_on_fresh_channel(connection, stream, true, &args).await? {
        Ok(_) => return Ok(()),
        Err(failure) => failure,
    };
    if kind != Stream::Control || !super::created_without(&failure, "x-max-length-bytes") {
        return Err(explain(failure, stream, kind));
    }
    // A control stream an earlier version created has no bound in bytes,
    // and RabbitMQ cannot add one in place: declared as it was.
    tracing::warn!(
        stream,
        "the control stream was created without a bound in bytes, so a flood of records can \
         grow it until they are 30 days old; `queuey topology apply` sets a `max-length-bytes` \
         policy on it"
    );
    let mut older = args;
    older.remove("x-max-length-bytes");
    match declare_on_fresh_channel(connection, stream, true, &older).await? {
        Ok(_) => Ok(()),
        Err(failure) => Err(explain(failure, stream, kind)),
    }
}

/// The error for a refused declaration of a stream.
fn explain(failure: Failure, stream: &str, kind: Stream) -> Error {
    let (max_age, bytes, lost) = match kind {
        Stream::Control => (
            topology::control_stream_max_age(),
            format!("x-max-length-bytes {}, ", topology::CONTROL_MAX_BYTES),
            "the commands in it are lost",
        ),
        Stream::Heartbeats => (
            topology::HEARTBEAT_MAX_AGE.to_owned(),
            String::new(),
            "it holds only recent heartbeats",
        ),
    };
    let name = kind.name();
    let what = format!("declaring the {name} `{stream}`");
    if failure.reply_code != Some(code::PRECONDITION_FAILED) {
        return failure.into_error(&what);
    }
    let hint = format!(
        "a queue of this name exists with other arguments, and RabbitMQ never changes them; \
         every process declares the {name} alike (x-queue-type stream, x-max-age {max_age}, \
         {bytes}x-stream-max-segment-size-bytes {}): delete that queue ({lost}) or give the \
         backend another `RabbitMqOptions::control_stream`. Streams need RabbitMQ 3.9 or later",
        topology::CONTROL_SEGMENT_BYTES
    );
    failure.hinted(&hint).into_error(&what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::BackendErrorKind;

    #[test]
    fn a_stream_declared_otherwise_says_what_to_do() {
        let failure = Failure {
            reply_code: Some(406),
            connection_lost: false,
            text: "PRECONDITION_FAILED - inequivalent arg 'x-queue-type'".to_owned(),
        };
        let e = explain(failure, "queuey.control", Stream::Control);
        assert!(matches!(&e, Error::Backend(b) if b.kind() == BackendErrorKind::Refused));
        let text = e.to_string();
        assert!(
            text.starts_with("declaring the control stream `queuey.control`: PRECONDITION_FAILED"),
            "{text}"
        );
        assert!(text.contains("x-max-age 30D"), "{text}");
        assert!(text.contains("control_stream"), "{text}");
    }
}
