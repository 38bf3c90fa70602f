//! The memory backend's shared state: queues, holds and dead letters.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::time::Instant;

use super::DeadLetter;
use crate::QueueConfig;
use crate::backend::ReplyTo;

/// A message as the memory "broker" stores it: encoded bytes, like a real
/// broker, so malformed bodies behave as they would there.
#[derive(Debug, Clone)]
pub(super) struct Message {
    pub(super) body: Arc<[u8]>,
    pub(super) priority: u8,
    pub(super) redelivered: bool,
    /// When the message reached the queue, for `message_ttl`.
    pub(super) arrived: Instant,
    /// Where the job's result goes, as a broker keeps a message's
    /// properties beside its body.
    pub(super) reply_to: Option<ReplyTo>,
}

#[derive(Debug, Default)]
pub(super) struct QueueState {
    /// `Some` when declared through this backend; `None` when the queue
    /// merely exists (see `MemoryBackend::create_queue`).
    pub(super) declared: Option<QueueConfig>,
    /// Higher priority first, then publication order.
    pub(super) ready: BTreeMap<(Reverse<u8>, u64), Message>,
    /// Delivered, not yet settled: tag -> (consumer, sequence, message).
    pub(super) unacked: HashMap<u64, (u64, u64, Message)>,
    pub(super) dead: Vec<DeadLetter>,
}

impl QueueState {
    fn max_priority(&self) -> u8 {
        self.declared.as_ref().map_or(0, QueueConfig::top_priority)
    }

    fn ttl_expired(&self, message: &Message, now: Instant) -> bool {
        let ttl = self
            .declared
            .as_ref()
            .and_then(|c| c.settings().message_ttl());
        ttl.is_some_and(|ttl| now.saturating_duration_since(message.arrived) >= ttl)
    }
}

#[derive(Debug)]
pub(super) struct Held {
    pub(super) queue: String,
    pub(super) message: Message,
}

/// A message taken off a queue for a consumer.
#[derive(Debug)]
pub(super) struct Taken {
    pub(super) tag: u64,
    pub(super) message: Message,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) queues: HashMap<String, QueueState>,
    /// Due time and sequence -> held message.
    pub(super) holds: BTreeMap<(Instant, u64), Held>,
    /// Consumer id -> unsettled deliveries.
    pub(super) consumers: HashMap<u64, usize>,
    pub(super) seq: u64,
    pub(super) closed: bool,
}

impl State {
    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Puts a message on a queue's ready list. The caller checked that the
    /// queue exists.
    pub(super) fn push_ready(&mut self, queue: &str, mut message: Message, seq: u64) {
        if let Some(q) = self.queues.get_mut(queue) {
            message.priority = message.priority.min(q.max_priority());
            q.ready.insert((Reverse(message.priority), seq), message);
        }
    }

    /// Moves every hold whose time has come onto its queue.
    pub(super) fn release_due(&mut self, now: Instant) {
        while let Some(entry) = self.holds.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((due, _), held) = entry.remove_entry();
            let seq = self.next_seq();
            let message = Message {
                arrived: due,
                ..held.message
            };
            self.push_ready(&held.queue, message, seq);
        }
    }

    pub(super) fn next_due(&self) -> Option<Instant> {
        self.holds.keys().next().map(|(due, _)| *due)
    }

    /// Takes the next message for a consumer, if its prefetch allows one.
    pub(super) fn take(
        &mut self,
        queue: &str,
        consumer: u64,
        prefetch: usize,
        now: Instant,
    ) -> Option<Taken> {
        let in_flight = *self.consumers.get(&consumer)?;
        if in_flight >= prefetch {
            return None;
        }
        let tag = self.seq + 1;
        let q = self.queues.get_mut(queue)?;
        loop {
            let ((_, seq), message) = q.ready.pop_first()?;
            if q.ttl_expired(&message, now) {
                continue;
            }
            q.unacked.insert(tag, (consumer, seq, message.clone()));
            self.seq = tag;
            *self.consumers.entry(consumer).or_default() += 1;
            return Some(Taken { tag, message });
        }
    }

    /// Forgets an unacked delivery; returns its sequence and message.
    pub(super) fn settle(&mut self, queue: &str, tag: u64) -> Option<(u64, Message)> {
        let (consumer, seq, message) = self.queues.get_mut(queue)?.unacked.remove(&tag)?;
        if let Some(n) = self.consumers.get_mut(&consumer) {
            *n = n.saturating_sub(1);
        }
        Some((seq, message))
    }

    /// Puts an unacked delivery back in its original place, marked
    /// redelivered.
    pub(super) fn requeue(&mut self, queue: &str, tag: u64) {
        if let Some((seq, message)) = self.settle(queue, tag) {
            let message = Message {
                redelivered: true,
                ..message
            };
            self.push_ready(queue, message, seq);
        }
    }
}
