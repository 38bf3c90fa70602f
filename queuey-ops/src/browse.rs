//! Reading a queue on AMQP 0-9-1 without losing a message or its place.
//!
//! AMQP 0-9-1 has no "peek". A read takes messages off the head and keeps
//! every one of them unacknowledged; closing the channel hands them all
//! back, and a classic queue puts requeued messages back at their original
//! positions. [`browse`] streams them to a consumer whose prefetch is the
//! number wanted; a [`Cursor`] takes them one `basic.get` at a time, for
//! the operations that decide message by message (redrive, purge). So a read leaves the queue as it found
//! it, in the same order, with two visible traces: the messages come back
//! with `redelivered = true`, and while they are held no other consumer can
//! see them. If the reading process dies, the broker requeues them the same
//! way when the connection drops; nothing is lost.
//!
//! The cursor stops after the number of messages the queue held when it was
//! opened, so a message that arrives during a long run (a job that fails
//! again right after a redrive) is not read in the same pass.
//!
//! The management API's "get messages" does the same get-and-requeue inside
//! the broker, but hands back headers without their AMQP types and bodies
//! that are not UTF-8 as base64, so it cannot support a lossless export or a
//! faithful redrive; it is not used.

use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicQosOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel};

use crate::amqp::{Amqp, QueueCounts, short};
use crate::error::{OpsError, Result};

/// One message read off a queue and held unacknowledged.
#[derive(Debug, Clone)]
pub struct Held {
    /// The delivery tag on the cursor's channel.
    pub tag: u64,
    /// 1-based position in the queue when the cursor was opened.
    pub position: usize,
    /// The body.
    pub body: Vec<u8>,
    /// The properties.
    pub properties: BasicProperties,
}

/// A pass over a queue from its head, holding what it reads.
#[derive(Debug)]
pub struct Cursor {
    channel: Channel,
    queue: String,
    routing: ShortString,
    remaining: usize,
    position: usize,
    counts: QueueCounts,
}

impl Cursor {
    /// Opens a cursor over at most `max` of the messages `queue` holds now.
    /// A missing queue is [`OpsError::UnknownQueue`].
    pub async fn open(amqp: &Amqp, queue: &str, max: Option<usize>) -> Result<Self> {
        let counts = amqp.require(queue).await?;
        let total = counts.messages as usize;
        Ok(Cursor {
            channel: amqp.channel().await?,
            queue: queue.to_owned(),
            routing: short(queue)?,
            remaining: max.map_or(total, |m| m.min(total)),
            position: 0,
            counts,
        })
    }

    /// The queue's counts when the cursor was opened (exact: a passive
    /// declare, not management statistics).
    pub fn counts(&self) -> QueueCounts {
        self.counts
    }

    /// The cursor's channel (for publishing in the same transaction).
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// The next message, or `None` at the end of the pass.
    pub async fn next(&mut self) -> Result<Option<Held>> {
        if self.remaining == 0 {
            return Ok(None);
        }
        let got = self
            .channel
            .basic_get(self.routing.clone(), BasicGetOptions { no_ack: false })
            .await
            .map_err(|e| OpsError::amqp(format!("reading `{}`", self.queue), e))?;
        let Some(message) = got else {
            self.remaining = 0;
            return Ok(None);
        };
        self.remaining -= 1;
        self.position += 1;
        let delivery = message.delivery;
        Ok(Some(Held {
            tag: delivery.delivery_tag,
            position: self.position,
            body: delivery.data,
            properties: delivery.properties,
        }))
    }

    /// Acknowledges (removes) one held message.
    pub async fn ack(&self, tag: u64) -> Result<()> {
        self.channel
            .basic_ack(tag, BasicAckOptions { multiple: false })
            .await
            .map_err(|e| OpsError::amqp(format!("acknowledging a message of `{}`", self.queue), e))
    }

    /// Ends the pass: every message still held goes back to its place.
    pub async fn release(self) {
        let _ = self.channel.close(200, ShortString::default()).await;
    }
}

/// Reads up to `max` messages from the head of `queue` and puts them all
/// back, in order.
pub async fn browse(amqp: &Amqp, queue: &str, max: Option<usize>) -> Result<Vec<Held>> {
    browse_counted(amqp, queue, max).await.map(|(held, _)| held)
}

/// Like [`browse`], also giving the queue's exact counts when the read began.
///
/// Reads with a consumer whose prefetch is the number of messages wanted,
/// so the broker streams them without a round trip each and delivers no
/// more than that; the channel is closed at the end, which requeues them
/// all in place. A read ends early when nothing arrives for
/// [`BROWSE_IDLE`] (another consumer took the rest).
pub async fn browse_counted(
    amqp: &Amqp,
    queue: &str,
    max: Option<usize>,
) -> Result<(Vec<Held>, QueueCounts)> {
    let counts = amqp.require(queue).await?;
    let total = counts.messages as usize;
    let want = max.map_or(total, |m| m.min(total));
    if want == 0 {
        return Ok((Vec::new(), counts));
    }
    let channel = amqp.channel().await?;
    let read = consume_and_hold(&channel, queue, want).await;
    let _ = channel.close(200, ShortString::default()).await;
    read.map(|held| (held, counts))
}

/// How long a browse waits for the next message before it takes the queue
/// as read.
pub const BROWSE_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

async fn consume_and_hold(channel: &Channel, queue: &str, want: usize) -> Result<Vec<Held>> {
    let what = || format!("reading `{queue}`");
    // A prefetch of 0 is unlimited: only for reads past the 16-bit window.
    let prefetch = u16::try_from(want).unwrap_or(0);
    channel
        .basic_qos(prefetch, BasicQosOptions { global: false })
        .await
        .map_err(|e| OpsError::amqp(what(), e))?;
    let mut consumer = channel
        .basic_consume(
            short(queue)?,
            ShortString::from(format!("queuey-browse-{}", uuid::Uuid::new_v4().simple())),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| OpsError::amqp(what(), e))?;
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let delivery = match tokio::time::timeout(BROWSE_IDLE, consumer.next()).await {
            Ok(Some(delivery)) => delivery.map_err(|e| OpsError::amqp(what(), e))?,
            Ok(None) | Err(_) => break,
        };
        out.push(Held {
            tag: delivery.delivery_tag,
            position: out.len() + 1,
            body: delivery.data,
            properties: delivery.properties,
        });
    }
    Ok(out)
}
