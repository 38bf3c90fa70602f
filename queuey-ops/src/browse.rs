//! Reading a queue on AMQP 0-9-1 without losing a message or its place.
//!
//! AMQP 0-9-1 has no "peek": a read keeps every message it takes
//! unacknowledged, and closing the channel (or a dropped connection) hands
//! them back to their original positions. The traces: they come back
//! `redelivered`, and while held no other consumer sees them.
//!
//! A [`Cursor`] reads with `basic.get`, [`WINDOW`] requests in flight, and
//! hands messages out in queue order (by delivery tag), so a reader holds
//! at most [`WINDOW`] messages in memory (a consumer's prefetch would push
//! the whole queue). A pass stops after the count the queue held when
//! opened: later arrivals wait for the next pass; a message another reader
//! holds is skipped; none is read twice. The management API's "get
//! messages" loses header types and non-UTF-8 bodies, so it is not used.

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

/// `basic.get` requests a [`Cursor`] keeps in flight.
pub(crate) const WINDOW: usize = 32;

/// One message read off a queue and held unacknowledged.
#[derive(Clone)]
pub(crate) struct Held {
    pub(crate) tag: u64,
    /// 1-based position in the pass.
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

/// A pass over a queue from its head, holding what it reads until
/// [`release`](Cursor::release) (or the connection closes).
pub(crate) struct Cursor {
    channel: Channel,
    queue: String,
    routing: ShortString,
    counts: QueueCounts,
    unrequested: usize,
    in_flight: FuturesUnordered<Get>,
    arrived: InOrder,
    /// A request came back empty: nothing more is ready.
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
    /// Opens a cursor over at most `max` of the messages `queue` holds now.
    pub(crate) async fn open(amqp: &Amqp, queue: &str, max: Option<usize>) -> Result<Self> {
        let counts = amqp.require(queue).await?;
        let total = counts.messages as usize;
        Ok(Cursor {
            // Its own channel: delivery tags count this pass from 1.
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

    /// The queue's exact counts when the cursor was opened.
    pub(crate) fn counts(&self) -> QueueCounts {
        self.counts
    }

    /// Messages handed out so far.
    pub(crate) fn read(&self) -> usize {
        self.handed_out
    }

    /// The cursor's channel (to publish in its transaction).
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

    /// Ends the pass, once the requests in flight are in: every message
    /// still held goes back to its place.
    pub(crate) async fn release(mut self) {
        while self.in_flight.next().await.is_some() {}
        self.arrived = InOrder::default();
        let _ = self.channel.close(200, ShortString::default()).await;
    }
}

/// Answers that may come back out of order, handed out by delivery tag.
#[derive(Debug, Default)]
struct InOrder {
    arrived: BTreeMap<u64, Held>,
    /// The tag of the last message handed out (tags count from 1).
    last_tag: u64,
}

impl InOrder {
    fn arrive(&mut self, held: Held) {
        self.arrived.insert(held.tag, held);
    }

    /// The next message in order, once it has arrived.
    fn next_ready(&mut self) -> Option<Held> {
        let held = self.arrived.remove(&(self.last_tag + 1))?;
        self.last_tag = held.tag;
        Some(held)
    }

    /// The earliest message that arrived, for when nothing more will.
    fn rest(&mut self) -> Option<Held> {
        let (_, held) = self.arrived.pop_first()?;
        self.last_tag = held.tag;
        Some(held)
    }
}

/// Reads up to `max` messages from the head of `queue` into memory and puts
/// them back, with the queue's exact counts when the read began.
pub(crate) async fn browse_counted(
    amqp: &Amqp,
    queue: &str,
    max: Option<usize>,
) -> Result<(Vec<Held>, QueueCounts)> {
    let mut cursor = Cursor::open(amqp, queue, max).await?;
    let counts = cursor.counts();
    let mut held = Vec::new();
    let outcome: Result<()> = async {
        while let Some(h) = cursor.next().await? {
            held.push(h);
        }
        Ok(())
    }
    .await;
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
