//! The follower's consumer of the stream on one connection.

use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Consumer};
use queuey_core::Error;

use crate::error::Failure;
use crate::link::Link;
use crate::{declare, properties};

/// How many records the broker may send ahead of the follower's
/// acknowledgements. A stream consumer must set one.
pub(super) const PREFETCH: u16 = 1_000;

/// A consumer of the control stream on one connection, on a channel of its
/// own that only ever acknowledges (with `multiple`).
pub(super) struct Live {
    pub(super) consumer: Consumer,
    pub(super) channel: Channel,
    pub(super) generation: u64,
}

/// Declares the stream and consumes it on a fresh channel of the current
/// connection, from `from` (`None`: its first record), within the call
/// bound.
pub(super) async fn start(link: &Link, stream: &str, from: Option<u64>) -> Result<Live, Error> {
    let what = format!("following control commands on `{stream}`");
    let failing = what.as_str();
    link.call(&what, |current| async move {
        let connection = &current.connection;
        let fail =
            |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(failing);
        declare::declare_control_stream(connection, stream).await?;
        let channel = connection.create_channel().await.map_err(fail)?;
        channel
            .basic_qos(PREFETCH, BasicQosOptions { global: false })
            .await
            .map_err(fail)?;
        let tag = format!("queuey.control.{}", uuid::Uuid::new_v4().simple());
        let consumer = channel
            .basic_consume(
                properties::short(stream),
                properties::short(&tag),
                BasicConsumeOptions::default(),
                offset_argument(from),
            )
            .await
            .map_err(fail)?;
        tracing::debug!(stream, consumer_tag = %tag, from = ?from, "following control commands");
        Ok(Live {
            consumer,
            channel,
            generation: current.generation,
        })
    })
    .await
}

/// Whether `error` says the stream exists but cannot be reached yet: a
/// broker that just restarted starts its streams a moment after it
/// accepts connections, and answers `NOT_FOUND - home node ... of durable
/// queue ... is down or inaccessible` until then.
pub(super) fn not_ready(error: &Error) -> bool {
    matches!(error, Error::Backend(e) if e.message().contains("is down or inaccessible"))
}

/// The consumer's `x-stream-offset`: `"first"`, or the offset to start at.
fn offset_argument(from: Option<u64>) -> FieldTable {
    let value = match from {
        None => AMQPValue::LongString(LongString::from("first")),
        Some(offset) => AMQPValue::LongLongInt(i64::try_from(offset).unwrap_or(i64::MAX)),
    };
    let mut args = FieldTable::default();
    args.insert(properties::short("x-stream-offset"), value);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_whose_node_is_starting_is_not_ready() {
        let refused = |text: &str| {
            Error::Backend(queuey_core::BackendError::new(
                queuey_core::BackendErrorKind::Refused,
                text,
            ))
        };
        assert!(not_ready(&refused(
            "declaring the control stream `queuey.control`: NOT_FOUND - home node 'n@h' of \
             durable queue 'queuey.control' in vhost '/' is down or inaccessible"
        )));
        assert!(!not_ready(&refused(
            "PRECONDITION_FAILED - inequivalent arg"
        )));
        assert!(!not_ready(&Error::ShutDown));
    }

    #[test]
    fn the_offset_is_first_or_a_64_bit_integer() {
        let first = offset_argument(None);
        assert_eq!(
            first.inner().get("x-stream-offset"),
            Some(&AMQPValue::LongString("first".into()))
        );
        let later = offset_argument(Some(42));
        assert_eq!(
            later.inner().get("x-stream-offset"),
            Some(&AMQPValue::LongLongInt(42))
        );
    }
}
