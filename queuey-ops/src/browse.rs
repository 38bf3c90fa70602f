//! Reading a queue on AMQP 0-9-1 without losing a message or its place.
//!
//! AMQP 0-9-1 has no "peek". A read takes messages off the head and keeps
//! every one of them unacknowledged; closing the channel hands them all
//! back, and a classic queue puts requeued messages back at their original
//! positions. So a read leaves the queue as it found it, in the same order,
//! with two visible traces: the messages come back with
//! `redelivered = true`, and while they are held no other consumer can see
//! them. If the reading process dies, the broker requeues them the same way
//! when the connection drops; nothing is lost, nothing is duplicated.
//!
//! A [`Cursor`] reads with `basic.get`, [`WINDOW`] requests in flight at a
//! time, and hands the messages out one by one in queue order (by delivery
//! tag, which the broker numbers in the order it hands messages out). A
//! consumer cannot do this job: without acknowledgements its prefetch
//! window is all it ever receives, and a window as large as the queue (or
//! unlimited, past 65,535) makes the broker push the whole queue into the
//! reader's memory at once. With the cursor, what the reader holds in
//! memory is at most [`WINDOW`] messages whatever the queue's length; the
//! broker keeps the rest, unacknowledged, until [`Cursor::release`]. A
//! caller that keeps only what it needs of each message (a count, a page,
//! the one it looks for) reads any queue in bounded memory, and can stop
//! as soon as it has its answer.
//!
//! The cursor stops after the number of messages the queue held when it was
//! opened, so a message that arrives during a long run (a job that fails
//! again right after a redrive) is not read in the same pass: it waits at
//! the tail for the next one. A message that another reader holds at that
//! moment is skipped by this pass (it is not ready); the pass then reads
//! one newer message in its place if one arrived, and ends early if none
//! did. No message is read twice in one pass.
//!
//! The management API's "get messages" does the same get-and-requeue inside
//! the broker, but hands back headers without their AMQP types and bodies
//! that are not UTF-8 as base64, so it cannot support a lossless export or a
//! faithful redrive; it is not used.

use std::collections::BTreeMap;
use std::fmt;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use lapin::message::BasicGetMessage;
use lapin::options::{BasicAckOptions, BasicGetOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel};

use crate::amqp::{Amqp, QueueCounts, short};
use crate::error::{OpsError, Result};

/// `basic.get` requests a [`Cursor`] keeps in flight: the most messages a
/// reader holds in memory at once, whatever the queue's length.
pub(crate) const WINDOW: usize = 32;

/// One message read off a queue and held unacknowledged.
#[derive(Clone)]
pub(crate) struct Held {
    /// The delivery tag on the cursor's channel.
    pub(crate) tag: u64,
    /// 1-based position in the pass (1 = the head of the queue when the
    /// cursor was opened).
    pub(crate) position: usize,
    pub(crate) body: Vec<u8>,
    pub(crate) properties: BasicProperties,
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("tag", &self.tag)
            .field("position", &self.position)
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

type Get = BoxFuture<'static, std::result::Result<Option<BasicGetMessage>, lapin::Error>>;

/// A pass over a queue from its head, holding what it reads.
///
/// Call [`release`](Cursor::release) when done: it hands every held message
/// back. (A cursor that is only dropped keeps them until the connection
/// closes.)
pub(crate) struct Cursor {
    channel: Channel,
    queue: String,
    routing: ShortString,
    counts: QueueCounts,
    /// `basic.get` requests still to send in this pass.
    unrequested: usize,
    in_flight: FuturesUnordered<Get>,
    /// Answers that came back before an earlier one.
    arrived: InOrder,
    /// A request came back empty: the queue has nothing more ready.
    drained: bool,
    handed_out: usize,
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cursor")
            .field("queue", &self.queue)
            .field("counts", &self.counts)
            .field("handed_out", &self.handed_out)
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl Cursor {
    /// Opens a cursor over at most `max` of the messages `queue` holds now
    /// (all of them when `None`). A missing queue is
    /// [`OpsError::UnknownQueue`].
    pub(crate) async fn open(amqp: &Amqp, queue: &str, max: Option<usize>) -> Result<Self> {
        let counts = amqp.require(queue).await?;
        let total = counts.messages as usize;
        Ok(Cursor {
            // A channel of its own: its delivery tags count this pass's
            // messages from 1, in the order the broker handed them out.
            channel: amqp.channel().await?,
            queue: queue.to_owned(),
            routing: short(queue)?,
            counts,
            unrequested: max.map_or(total, |m| m.min(total)),
            in_flight: FuturesUnordered::new(),
            arrived: InOrder::default(),
            drained: false,
            handed_out: 0,
        })
    }

    /// The queue's counts when the cursor was opened (exact: a passive
    /// declare, not management statistics).
    pub(crate) fn counts(&self) -> QueueCounts {
        self.counts
    }

    /// How many messages the cursor has handed out so far.
    pub(crate) fn read(&self) -> usize {
        self.handed_out
    }

    /// The cursor's channel (for publishing in the same transaction).
    pub(crate) fn channel(&self) -> &Channel {
        &self.channel
    }

    /// The next message, or `None` at the end of the pass.
    pub(crate) async fn next(&mut self) -> Result<Option<Held>> {
        loop {
            if let Some(held) = self.arrived.next_ready() {
                return Ok(Some(self.hand_out(held)));
            }
            self.request_more();
            let Some(answer) = self.in_flight.next().await else {
                // Nothing in flight any more: what is left goes out in order.
                let rest = self.arrived.rest();
                return Ok(rest.map(|held| self.hand_out(held)));
            };
            let answer =
                answer.map_err(|e| OpsError::amqp(format!("reading `{}`", self.queue), e))?;
            match answer {
                Some(message) => {
                    let delivery = message.delivery;
                    let tag = delivery.delivery_tag;
                    self.arrived.arrive(Held {
                        tag,
                        position: usize::try_from(tag).unwrap_or(usize::MAX),
                        body: delivery.data,
                        properties: delivery.properties,
                    });
                }
                None => self.drained = true,
            }
        }
    }

    fn hand_out(&mut self, held: Held) -> Held {
        self.handed_out += 1;
        held
    }

    /// Keeps [`WINDOW`] requests in flight while the pass has more to read.
    fn request_more(&mut self) {
        while !self.drained && self.unrequested > 0 && self.in_flight.len() < WINDOW {
            let channel = self.channel.clone();
            let routing = self.routing.clone();
            self.in_flight.push(Box::pin(async move {
                channel
                    .basic_get(routing, BasicGetOptions { no_ack: false })
                    .await
            }));
            self.unrequested -= 1;
        }
    }

    /// Acknowledges (removes) one held message.
    pub(crate) async fn ack(&mut self, tag: u64) -> Result<()> {
        self.channel
            .basic_ack(tag, BasicAckOptions { multiple: false })
            .await
            .map_err(|e| OpsError::amqp(format!("acknowledging a message of `{}`", self.queue), e))
    }

    /// Ends the pass: every message still held goes back to its place.
    ///
    /// Waits for the requests in flight first (at most [`WINDOW`]), so that
    /// the channel closes with nothing on the way.
    pub(crate) async fn release(mut self) {
        while self.in_flight.next().await.is_some() {}
        self.arrived = InOrder::default();
        let _ = self.channel.close(200, ShortString::default()).await;
    }
}

/// Answers that may come back out of order, handed out by delivery tag:
/// the broker numbers a channel's deliveries 1, 2, 3… in queue order.
#[derive(Debug)]
struct InOrder {
    arrived: BTreeMap<u64, Held>,
    /// The delivery tag of the next message to hand out.
    next_tag: u64,
}

impl Default for InOrder {
    fn default() -> Self {
        InOrder {
            arrived: BTreeMap::new(),
            next_tag: 1,
        }
    }
}

impl InOrder {
    fn arrive(&mut self, held: Held) {
        self.arrived.insert(held.tag, held);
    }

    /// The next message in order, once it has arrived.
    fn next_ready(&mut self) -> Option<Held> {
        let held = self.arrived.remove(&self.next_tag)?;
        self.next_tag = held.tag + 1;
        Some(held)
    }

    /// The earliest message that arrived, for when nothing more will.
    fn rest(&mut self) -> Option<Held> {
        let (_, held) = self.arrived.pop_first()?;
        self.next_tag = held.tag + 1;
        Some(held)
    }
}

/// Reads up to `max` messages from the head of `queue` and puts them all
/// back, in order, with the queue's exact counts when the read began.
///
/// Every message read is kept in the returned vector: give a `max` that
/// fits in memory, or read with a [`Cursor`] and keep less.
pub(crate) async fn browse_counted(
    amqp: &Amqp,
    queue: &str,
    max: Option<usize>,
) -> Result<(Vec<Held>, QueueCounts)> {
    let mut cursor = Cursor::open(amqp, queue, max).await?;
    let counts = cursor.counts();
    let mut held = Vec::new();
    let outcome = loop {
        match cursor.next().await {
            Ok(Some(h)) => held.push(h),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    cursor.release().await;
    outcome.map(|()| (held, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(tag: u64) -> Held {
        Held {
            tag,
            position: tag as usize,
            body: Vec::new(),
            properties: BasicProperties::default(),
        }
    }

    #[test]
    fn answers_that_come_back_out_of_order_are_handed_out_in_queue_order() {
        let mut order = InOrder::default();
        order.arrive(held(3));
        order.arrive(held(2));
        assert!(order.next_ready().is_none(), "1 has not arrived");
        order.arrive(held(1));
        let tags: Vec<u64> = std::iter::from_fn(|| order.next_ready())
            .map(|h| h.tag)
            .collect();
        assert_eq!(tags, vec![1, 2, 3]);
        order.arrive(held(6));
        order.arrive(held(5));
        assert!(order.next_ready().is_none());
        assert_eq!(order.rest().map(|h| h.tag), Some(5));
        assert_eq!(order.next_ready().map(|h| h.tag), Some(6));
    }
}
