//! Declaring the control stream, and what a refusal tells the user to do.

use lapin::Connection;
use lapin::types::ShortString;
use queuey_core::Error;

use super::{declare, new_channel};
use crate::error::{Failure, code};
use crate::topology;

/// Declares the control stream `stream` (durable, the arguments of
/// [`topology::control_stream_arguments`]) on a fresh channel that is
/// closed afterwards.
pub(crate) async fn declare_control_stream(
    connection: &Connection,
    stream: &str,
) -> Result<(), Error> {
    let channel = new_channel(
        connection,
        "opening a channel to declare the control stream",
    )
    .await?;
    let args = topology::control_stream_arguments();
    let result = declare(connection, &channel, stream, true, &args)
        .await
        .map_err(|failure| explain(failure, stream));
    if channel.status().connected() {
        let _ = channel.close(200, ShortString::default()).await;
    }
    result
}

/// The error for a refused declaration of the control stream.
fn explain(failure: Failure, stream: &str) -> Error {
    let what = format!("declaring the control stream `{stream}`");
    if failure.reply_code != Some(code::PRECONDITION_FAILED) {
        return failure.into_error(&what);
    }
    let hint = format!(
        "a queue of this name exists with other arguments, and RabbitMQ never changes them; \
         every process declares the control stream alike (x-queue-type stream, x-max-age {}, \
         x-stream-max-segment-size-bytes {}): delete that queue (the commands in it are lost) \
         or give the backend another `RabbitMqOptions::control_stream`. Streams need \
         RabbitMQ 3.9 or later",
        topology::control_stream_max_age(),
        topology::CONTROL_SEGMENT_BYTES
    );
    Failure {
        text: format!("{}; {hint}", failure.text),
        ..failure
    }
    .into_error(&what)
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
        let e = explain(failure, "queuey.control");
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
