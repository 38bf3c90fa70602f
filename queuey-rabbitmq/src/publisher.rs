//! The pool of publishing channels.
//!
//! lapin matches a returned message to whichever confirmation completes next,
//! and concurrent publishes on one channel can reach the broker out of
//! delivery-tag order, so with several publishes in flight on a channel an
//! unroutable message can be reported as stored. Here every channel carries
//! exactly one publish at a time: a publish holds its channel's lock from
//! `basic.publish` until its confirmation has been read, so the confirmation
//! a publish awaits can only be its own.

use std::fmt;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use queuey_core::Error;
use tokio::sync::{MutexGuard, SemaphorePermit};

use crate::error::{Confirmed, Failure, confirm_outcome, connection_lost};
use crate::pool::ChannelPool;

/// One publish: where to, what, and the message id it carries.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    pub(crate) queue: &'a str,
    pub(crate) body: &'a [u8],
    pub(crate) message_id: &'a str,
    pub(crate) properties: BasicProperties,
}

/// Confirm-mode channels, each used by one publish at a time; a channel is
/// opened on first use and again after a channel exception closed it.
#[derive(Debug)]
pub(crate) struct Publisher {
    pool: ChannelPool,
}

impl Publisher {
    pub(crate) fn new(channels: usize) -> Self {
        Publisher {
            pool: ChannelPool::new(channels),
        }
    }

    /// Publishes to the default exchange with the queue as routing key,
    /// `mandatory`, and waits for the confirmation. `Ok` only for a bare ack.
    pub(crate) async fn publish(
        &self,
        connection: &Connection,
        out: Outgoing<'_>,
    ) -> Result<(), Error> {
        self.reserve(connection).await?.publish(out).await
    }

    /// Waits for a free channel and takes it, so that a publish can follow
    /// at once (a hold publish reserves its channel before declaring the
    /// hold queue, so that nothing waits between the declaration renewing
    /// the queue's lease and the publish).
    pub(crate) async fn reserve<'a>(
        &'a self,
        connection: &'a Connection,
    ) -> Result<Reservation<'a>, Error> {
        let (permit, mut slot) = self.pool.take().await?;
        // The channel leaves its slot for the whole publish and goes back only
        // once its confirmation was read. If this future is dropped in between
        // (a caller's timeout, a worker abandoning a job at shutdown), the slot
        // stays empty and the next publish opens a fresh channel, so it cannot
        // inherit a confirmation or a return that is not its own, whatever
        // lapin does with an abandoned confirmation.
        let channel = take_or_open(&mut slot, connection).await?;
        Ok(Reservation {
            _permit: permit,
            slot,
            channel,
            connection,
        })
    }

    /// Closes the pool: later publishes fail with [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.pool.close();
    }
}

/// A publishing channel taken from the pool for one publish.
pub(crate) struct Reservation<'a> {
    _permit: SemaphorePermit<'a>,
    slot: MutexGuard<'a, Option<Channel>>,
    channel: Channel,
    connection: &'a Connection,
}

impl Reservation<'_> {
    /// Publishes on the reserved channel and waits for the confirmation,
    /// then returns the channel to the pool.
    pub(crate) async fn publish(mut self, out: Outgoing<'_>) -> Result<(), Error> {
        let what = || format!("publishing to `{}`", out.queue);
        let routing_key = ShortString::try_new(out.queue).map_err(|_| {
            Error::invalid_config(format!(
                "queue name `{}` is {} bytes, over the 255-byte AMQP limit",
                out.queue,
                out.queue.len()
            ))
        })?;
        let published = self
            .channel
            .basic_publish(
                ShortString::default(),
                routing_key,
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                out.body,
                out.properties,
            )
            .await;
        let confirmation = match published {
            Ok(pending) => pending.await,
            Err(e) => Err(e),
        };
        if self.channel.status().connected() {
            *self.slot = Some(self.channel.clone());
        }
        // Otherwise a channel exception closed it: the slot stays empty and
        // the next publish opens a new one.
        let connected = self.connection.status().connected();
        let confirmation =
            confirmation.map_err(|e| Failure::of(&e, connected).into_error(&what()))?;
        // The slot stayed locked until here: its confirmation was ours.
        drop(self);
        confirm_outcome(out.queue, out.message_id, plain(confirmation))
    }
}

impl fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("channel", &self.channel.id())
            .finish()
    }
}

/// Takes the slot's channel, or opens one (in confirm mode) if the slot is
/// empty or its channel closed. The slot is left empty.
async fn take_or_open(
    slot: &mut Option<Channel>,
    connection: &Connection,
) -> Result<Channel, Error> {
    if let Some(channel) = slot.take().filter(|c| c.status().connected()) {
        return Ok(channel);
    }
    if !connection.status().connected() {
        return Err(connection_lost("opening a publishing channel"));
    }
    let fail = |e: lapin::Error| {
        Failure::of(&e, connection.status().connected()).into_error("opening a publishing channel")
    };
    let channel = connection.create_channel().await.map_err(fail)?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(fail)?;
    Ok(channel)
}

fn plain(confirmation: Confirmation) -> Confirmed {
    match confirmation {
        Confirmation::Ack(None) => Confirmed::Ack,
        Confirmation::Nack(None) => Confirmed::Nack,
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
            Confirmed::Returned {
                message_id: returned
                    .delivery
                    .properties
                    .message_id()
                    .as_ref()
                    .map(|id| id.as_str().to_owned()),
                reply_code: returned.reply_code,
                reply_text: returned.reply_text.as_str().to_owned(),
            }
        }
        Confirmation::NotRequested => Confirmed::NotRequested,
    }
}
