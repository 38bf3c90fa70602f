//! Consuming a fleet stream: the follower's consumer on one connection,
//! and reads up to a sync marker.

use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::BasicAckOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Consumer};
use queuey_core::Error;

use super::message;
use crate::error::Failure;
use crate::link::Link;
use crate::outbox::Outbox;
use crate::trust::Senders;
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

/// Where a consumer of the stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StartAt {
    /// At the stream's first record.
    First,
    /// At the stream's end: only records written after the consumer
    /// attached.
    Next,
    /// At this offset.
    Offset(u64),
    /// At the first chunk holding a record written at or after this time,
    /// in seconds since the Unix epoch (by the broker's clock).
    Since(u64),
}

/// Declares the stream and consumes it on a fresh channel of the current
/// connection, from `from`, within the call bound.
pub(super) async fn start(link: &Link, stream: &str, from: StartAt) -> Result<Live, Error> {
    let what = format!("following control commands on `{stream}`");
    let failing = what.as_str();
    link.call(&what, |current| async move {
        let connection = &current.connection;
        let fail =
            |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(failing);
        declare::declare_stream(connection, stream, declare::Stream::Control).await?;
        let channel = connection.create_channel().await.map_err(fail)?;
        let tag = format!("queuey.control.{}", uuid::Uuid::new_v4().simple());
        let consumer =
            crate::channel::consume(&channel, stream, &tag, PREFETCH, offset_argument(from))
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

/// The offset at the stream's end now: a consumer attaches at the end, a
/// sync marker is published through `outbox`, and the consumer reads up to
/// it, each step within the call bound. `None` if the consumer ended first
/// (the stream was deleted meanwhile).
pub(super) async fn tail(
    link: &Link,
    outbox: &Outbox,
    senders: &Senders,
    stream: &str,
) -> Result<Option<u64>, Error> {
    let mut live = start(link, stream, StartAt::Next).await?;
    let nonce = uuid::Uuid::new_v4();
    let mut marker = message::sync_marker(stream, nonce);
    marker.properties = senders.sign_if_known(marker.properties);
    let found = match outbox.control(marker).await {
        Ok(()) => {
            let what = format!("looking at the end of the control stream `{stream}`");
            let failing = what.as_str();
            let consumer = &mut live.consumer;
            link.call(&what, |current| async move {
                let connected = current.connection.status().connected();
                let fail = |e: lapin::Error| Failure::of(&e, connected).into_error(failing);
                let marker = read_to_marker(consumer, nonce, fail, |_| {}).await?;
                Ok(marker.and_then(|marker| message::offset(&marker.properties)))
            })
            .await
        }
        Err(error) => Err(error),
    };
    crate::channel::close(&live.channel).await;
    found
}

/// Reads `consumer` up to the sync marker carrying `nonce`, acknowledging
/// every delivery (with `multiple`: on a stream that is flow control) and
/// handing every other one to `each`. The marker, or `None` if the
/// consumer ended first.
pub(crate) async fn read_to_marker(
    consumer: &mut Consumer,
    nonce: uuid::Uuid,
    fail: impl Fn(lapin::Error) -> Error,
    mut each: impl FnMut(Delivery),
) -> Result<Option<Delivery>, Error> {
    while let Some(delivery) = consumer.next().await {
        let delivery = delivery.map_err(&fail)?;
        delivery
            .acker
            .ack(BasicAckOptions { multiple: true })
            .await
            .map_err(&fail)?;
        if message::is_sync_marker(&delivery.properties)
            && message::sync_nonce(&delivery.data) == Some(nonce)
        {
            return Ok(Some(delivery));
        }
        each(delivery);
    }
    Ok(None)
}

/// Whether following the stream may work if tried again shortly: the
/// connection was lost (the link reconnects; RabbitMQ 4.3 closes it for a
/// stream not up yet), or the stream exists but is not up yet, after a
/// broker restart (`... is down or inaccessible`) or just declared (`...
/// does not have a replica on the local node`).
pub(super) fn try_again(error: &Error) -> bool {
    error.is_transient()
        || matches!(error, Error::Backend(e)
            if e.message().contains("is down or inaccessible")
                || e.message().contains("does not have a replica on the local node"))
}

/// The consumer's `x-stream-offset`: `"first"`, the offset to start at,
/// or a time (an AMQP timestamp).
fn offset_argument(from: StartAt) -> FieldTable {
    stream_offset(match from {
        StartAt::First => AMQPValue::LongString(LongString::from("first")),
        StartAt::Next => AMQPValue::LongString(LongString::from("next")),
        StartAt::Offset(offset) => properties::integer(offset),
        StartAt::Since(seconds) => AMQPValue::Timestamp(seconds),
    })
}

/// A consumer's arguments starting it at `offset` (`x-stream-offset`).
pub(crate) fn stream_offset(offset: AMQPValue) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(properties::short("x-stream-offset"), offset);
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
        assert!(try_again(&refused(
            "declaring the control stream `queuey.control`: NOT_FOUND - home node 'n@h' of \
             durable queue 'queuey.control' in vhost '/' is down or inaccessible"
        )));
        assert!(try_again(&refused(
            "following control commands on `s`: PRECONDITION_FAILED - queue 'queue 's' in \
             vhost '/'' does not have a replica on the local node"
        )));
        assert!(!try_again(&refused(
            "PRECONDITION_FAILED - inequivalent arg"
        )));
        assert!(!try_again(&Error::ShutDown));
    }

    #[test]
    fn the_offset_is_first_next_a_64_bit_integer_or_a_timestamp() {
        let first = offset_argument(StartAt::First);
        assert_eq!(
            first.inner().get("x-stream-offset"),
            Some(&AMQPValue::LongString("first".into()))
        );
        assert_eq!(
            offset_argument(StartAt::Next)
                .inner()
                .get("x-stream-offset"),
            Some(&AMQPValue::LongString("next".into()))
        );
        let later = offset_argument(StartAt::Offset(42));
        assert_eq!(
            later.inner().get("x-stream-offset"),
            Some(&AMQPValue::LongLongInt(42))
        );
        let since = offset_argument(StartAt::Since(1_700_000_000));
        assert_eq!(
            since.inner().get("x-stream-offset"),
            Some(&AMQPValue::Timestamp(1_700_000_000))
        );
    }
}
