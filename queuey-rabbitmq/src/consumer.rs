//! Consuming a queue: a fresh channel per consumer, its prefetch, its tag,
//! and the handling of bodies that are not envelopes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::{BasicConsumeOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::{FieldTable, ShortString};
use queuey_core::backend::MALFORMED_ENVELOPE_REASON;
use queuey_core::{DecodeError, Delivery, DeliveryStream, Envelope, Error, QueueConfig};
use tokio::sync::RwLock;

use crate::acks::Acks;
use crate::backend::{Inner, timed_out};
use crate::delivery::{Around, RabbitMqDelivery, requeue_later};
use crate::error::Failure;
use crate::guard::Guard;
use crate::properties::{self, DeadLetterInfo};
use crate::publisher::Outgoing;
use crate::rehold::{self, Due};
use crate::topology;
use crate::{declare, hold};

/// The longest queue-name part of a consumer tag, in bytes.
pub(crate) const TAG_QUEUE_BYTES: usize = 160;

static TAG_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A consumer tag `queuey.{queue}.{nanos:x}.{sequence}`, the queue cut to
/// [`TAG_QUEUE_BYTES`] on a character boundary. Unique within the process,
/// and readable in the broker's consumer list.
pub(crate) fn consumer_tag(queue: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let sequence = TAG_SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!(
        "queuey.{}.{nanos:x}.{sequence}",
        truncate(queue, TAG_QUEUE_BYTES)
    )
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Starts a consumer of `config`'s queue on a channel of its own, with
/// `basic_qos(prefetch, global = false)` set before `basic_consume`; with
/// the [poison guard](crate#poison-guard) on, a second consumer of its
/// suspect queue on another channel, with a prefetch of 1 (declaring the
/// suspect queue first), merged into the same stream.
///
/// The stream outlives the connection: when the connection dies (or the
/// broker cancels a consumer because its queue was deleted), each consumer
/// consumes again with the same prefetch on the backend's next connection,
/// declaring the queues again first if they were gone. It ends with an
/// error only for what cannot heal (the backend gave up, the broker refuses
/// a queue), and with `None` once the backend is closed.
pub(crate) async fn consume(
    inner: Arc<Inner>,
    config: &QueueConfig,
) -> Result<DeliveryStream, Error> {
    config.validate()?;
    if inner.is_closed() {
        return Err(Error::ShutDown);
    }
    let suspects = inner
        .options
        .suspect_suffix_in_use()
        .map(|suffix| topology::suspect_queue_name(config.name(), suffix));
    // The consumers start now, so that a refusal is the caller's error.
    let gate = Arc::new(RwLock::new(()));
    let work =
        Consumer::start_on(Arc::clone(&inner), config, Source::Work, Arc::clone(&gate)).await?;
    match suspects {
        None => Ok(work.into_stream()),
        Some(name) => {
            let source = Source::Suspects(Arc::from(name));
            let suspects = Consumer::start_on(inner, config, source, gate).await?;
            Ok(futures::stream::select(work.into_stream(), suspects.into_stream()).boxed())
        }
    }
}

/// Which queue a consumer takes from.
#[derive(Debug, Clone)]
enum Source {
    /// The work queue itself, with its prefetch.
    Work,
    /// Its suspect queue (the name), one delivery at a time.
    Suspects(Arc<str>),
}

/// The first pause before consuming again after the consumer was lost; it
/// doubles on every loss in a row, up to [`RESUME_PAUSE_MAX`].
const RESUME_PAUSE_MIN: Duration = Duration::from_millis(50);
const RESUME_PAUSE_MAX: Duration = Duration::from_secs(2);

/// A consumer on one connection.
struct Live {
    consumer: lapin::Consumer,
    /// The writer of the channel's acknowledgements, which holds the
    /// channel, shared with every delivery taken from it (see
    /// [`RabbitMqDelivery`]).
    acks: Acks,
    tag: String,
    generation: u64,
}

struct Consumer {
    inner: Arc<Inner>,
    config: QueueConfig,
    /// The work queue: the queue of every delivery, whichever it came from.
    queue: Arc<str>,
    source: Source,
    /// The queue consumed: the work queue or its suspect queue.
    consumed: Arc<str>,
    live: Option<Live>,
    ended: bool,
    pause: Duration,
    /// Shared by the consumers of one stream: each move of the poison guard
    /// holds it (shared) until it is done (publish, acknowledgement, and a
    /// round trip proving the broker has the acknowledgement), and a
    /// delivery is handed to the worker only once it is free (exclusive, at
    /// once released), so no delivery is handed out meanwhile. A job that kills the process the
    /// moment it runs (the suspect copy of a poison job, most likely) thus
    /// cannot cut off the acknowledgement of the original and leave the job
    /// twice.
    gate: Arc<RwLock<()>>,
}

impl Consumer {
    /// A consumer of `source`, consuming already.
    async fn start_on(
        inner: Arc<Inner>,
        config: &QueueConfig,
        source: Source,
        gate: Arc<RwLock<()>>,
    ) -> Result<Consumer, Error> {
        let queue: Arc<str> = Arc::from(config.name());
        let consumed = match &source {
            Source::Work => Arc::clone(&queue),
            Source::Suspects(name) => Arc::clone(name),
        };
        let mut state = Consumer {
            inner,
            config: config.clone(),
            queue,
            source,
            consumed,
            live: None,
            ended: false,
            pause: RESUME_PAUSE_MIN,
            gate,
        };
        state.live = Some(state.start().await?);
        Ok(state)
    }

    fn into_stream(self) -> DeliveryStream {
        futures::stream::unfold(self, |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        })
        .boxed()
    }

    fn prefetch(&self) -> u16 {
        match self.source {
            Source::Work => self.config.settings().prefetch(),
            Source::Suspects(_) => 1,
        }
    }

    /// Opens a channel on the current connection (waiting for a
    /// reconnection up to the call bound) and consumes on it; a suspect
    /// queue is declared first, in case no `declare` of this process made
    /// it.
    async fn start(&self) -> Result<Live, Error> {
        let queue = &*self.consumed;
        let what = format!("consuming `{queue}`");
        let current = self.inner.link.connection(&what).await?;
        let bound = self.inner.options.call_timeout;
        let connection = &current.connection;
        let fail =
            |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(&what);
        let starting = async {
            if let Source::Suspects(name) = &self.source {
                declare::declare_suspect_queue(connection, name, &self.inner.options, &self.config)
                    .await?;
            }
            let channel = connection.create_channel().await.map_err(fail)?;
            channel
                .basic_qos(self.prefetch(), BasicQosOptions { global: false })
                .await
                .map_err(fail)?;
            let tag = consumer_tag(queue);
            let consumer = channel
                .basic_consume(
                    properties::short(queue),
                    properties::short(&tag),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(fail)?;
            Ok::<_, Error>(Live {
                acks: Acks::start(channel),
                consumer,
                tag,
                generation: current.generation,
            })
        };
        let result = match tokio::time::timeout(bound, starting).await {
            Ok(result) => result,
            Err(_) => Err(timed_out(&what, bound)),
        };
        match &result {
            Ok(live) => {
                tracing::debug!(queue, consumer_tag = %live.tag, prefetch = self.prefetch(), "consuming");
            }
            Err(error) => self.inner.saw(current.generation, error),
        }
        result
    }

    async fn next(&mut self) -> Option<Result<Box<dyn Delivery>, Error>> {
        loop {
            if self.ended {
                return None;
            }
            if self.inner.is_closed() {
                self.ended = true;
                return None;
            }
            let Some(live) = self.live.as_mut() else {
                match self.start().await {
                    Ok(live) => {
                        tracing::info!(queue = %self.consumed, consumer_tag = %live.tag, "consuming again on the new connection");
                        self.live = Some(live);
                    }
                    Err(error) if error.is_transient() => {
                        tracing::debug!(queue = %self.consumed, %error, "could not consume yet; trying again");
                        self.back_off().await;
                    }
                    Err(error) => {
                        self.ended = true;
                        if matches!(error, Error::ShutDown) {
                            return None;
                        }
                        tracing::error!(queue = %self.consumed, %error, "cannot consume; the stream ends");
                        return Some(Err(error));
                    }
                }
                continue;
            };
            match live.consumer.next().await {
                Some(Ok(mut delivery)) => {
                    self.pause = RESUME_PAUSE_MIN;
                    // Known to the writer before anything can settle it.
                    live.acks.delivered(delivery.delivery_tag);
                    let acks = live.acks.clone();
                    // Only a delivery that came back unsettled meets the guard.
                    let guarded =
                        delivery.redelivered && self.inner.options.guard_in_use().is_some();
                    // The guard copies the body as it came; the worker's
                    // delivery keeps only the envelope and the bytes around
                    // its payload, a large payload in the body's own memory.
                    let decoded = if guarded {
                        Envelope::decode_located(&delivery.data)
                            .map(|(envelope, _)| (envelope, None))
                    } else {
                        match Envelope::decode_taking(std::mem::take(&mut delivery.data)) {
                            Ok((envelope, around, split)) => Ok((envelope, Some((around, split)))),
                            Err((error, body)) => {
                                delivery.data = body;
                                Err(error)
                            }
                        }
                    };
                    match decoded {
                        Ok((envelope, None)) => {
                            // Moves run side by side (a slow confirmation must
                            // not hold up the next one); each holds the gate
                            // shared until its ack is in.
                            let moving = Arc::clone(&self.gate).read_owned().await;
                            let guard = Guard {
                                inner: Arc::clone(&self.inner),
                                config: self.config.clone(),
                                channel: live.acks.channel().clone(),
                                prefetch: self.prefetch(),
                                acks,
                            };
                            tokio::spawn(async move {
                                guard.divert(delivery, &envelope).await;
                                drop(moving);
                            });
                        }
                        Ok((envelope, Some((around, split)))) => {
                            // A job only reaches the suspect queue by coming
                            // back unsettled: it is a redelivery to the worker.
                            delivery.redelivered |= matches!(self.source, Source::Suspects(_));
                            let due = rehold::due(&delivery.properties, hold::now_ms);
                            let delivery = Box::new(RabbitMqDelivery::new(
                                Arc::clone(&self.inner),
                                acks,
                                Arc::clone(&self.queue),
                                envelope,
                                Around::new(around, split),
                                delivery,
                            ));
                            match due {
                                Due::Now => {
                                    drop(self.gate.write().await);
                                    return Some(Ok(delivery));
                                }
                                Due::Later {
                                    remaining,
                                    due_at_ms,
                                } => {
                                    rehold::hold_again(&self.inner, delivery, remaining, due_at_ms)
                                        .await
                                }
                                Due::Absurd(reason) => rehold::refuse(delivery, reason).await,
                            }
                        }
                        Err(error) => self.malformed(delivery, error, &acks).await,
                    }
                }
                Some(Err(e)) => {
                    let generation = live.generation;
                    let tag = std::mem::take(&mut live.tag);
                    self.live = None;
                    if self.inner.is_closed() {
                        continue;
                    }
                    tracing::warn!(queue = %self.consumed, consumer_tag = %tag, error = %e, "the consumer was lost; consuming again once the connection is back");
                    self.inner.link.suspect(generation);
                    self.back_off().await;
                }
                None => {
                    let generation = live.generation;
                    let connected = live.acks.channel().status().connected();
                    let tag = std::mem::take(&mut live.tag);
                    self.live = None;
                    if self.inner.is_closed() {
                        continue;
                    }
                    if connected {
                        // We never cancel a consumer that is still being
                        // polled, so the broker did: its queue was deleted.
                        tracing::warn!(
                            queue = %self.consumed,
                            consumer_tag = %tag,
                            "the broker cancelled the consumer (was the queue deleted?); declaring the queue again and consuming"
                        );
                        if let Err(error) = self.redeclare().await {
                            if !error.is_transient() {
                                self.ended = true;
                                tracing::error!(queue = %self.queue, %error, "could not declare the queue again; the stream ends");
                                return Some(Err(error));
                            }
                            tracing::warn!(queue = %self.queue, %error, "could not declare the queue again yet");
                        }
                    } else {
                        tracing::warn!(queue = %self.consumed, consumer_tag = %tag, "the consumer's channel closed; consuming again once the connection is back");
                        self.inner.link.suspect(generation);
                    }
                    self.back_off().await;
                }
            }
        }
    }

    /// Waits before consuming again, longer after each loss in a row.
    async fn back_off(&mut self) {
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(RESUME_PAUSE_MAX);
    }

    /// Declares the consumed queue (and its dead-letter queue) again.
    async fn redeclare(&self) -> Result<(), Error> {
        let current = self
            .inner
            .link
            .connection(&format!("declaring `{}` again", self.queue))
            .await?;
        let bound = self.inner.options.call_timeout;
        let declaring = declare::declare_queues(
            &current.connection,
            &self.inner.options,
            std::slice::from_ref(&self.config),
            |_| {},
        );
        match tokio::time::timeout(bound, declaring).await {
            Ok(result) => result,
            Err(_) => Err(timed_out("declaring the queue again", bound)),
        }
    }

    /// Copies a body that is not an envelope to the dead-letter queue and
    /// acknowledges it; it never reaches the stream.
    async fn malformed(&self, delivery: LapinDelivery, error: DecodeError, acks: &Acks) {
        let queue = &*self.queue;
        let tag = delivery.delivery_tag;
        tracing::warn!(queue, delivery_tag = tag, %error, "a message body is not a job envelope");
        let Some(suffix) = self.inner.options.dead_suffix_in_use() else {
            reject(&delivery, queue, "dead-letter queues are off").await;
            acks.settled(tag);
            return;
        };
        let dead = topology::dead_letter_queue_name(queue, suffix);
        let message_id = delivery
            .properties
            .message_id()
            .as_ref()
            .map(ShortString::to_string)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let info = DeadLetterInfo {
            reason: MALFORMED_ENVELOPE_REASON,
            original_queue: queue,
            attempts: 0,
        };
        let out = Outgoing {
            queue: dead.clone(),
            body: bytes::Bytes::from(delivery.data),
            properties: properties::with_dead_letter_headers(
                properties::malformed_properties(&message_id),
                &info,
            ),
            message_id,
        };
        let published = self.inner.send_dead_letter(out, &self.config).await;
        match published {
            Ok(()) => match acks.ack(tag).await {
                Ok(true) => {
                    tracing::info!(queue, dead_letter_queue = %dead, "malformed message moved to the dead-letter queue")
                }
                other => tracing::error!(
                    queue,
                    delivery_tag = tag,
                    outcome = ?other,
                    "a malformed message was copied to the dead-letter queue but could not be acknowledged; \
                     it will be delivered (and copied) again"
                ),
            },
            Err(error) => {
                tracing::error!(
                    queue,
                    delivery_tag = tag,
                    %error,
                    "could not copy a malformed message to the dead-letter queue; it goes back to \
                     the broker, to be delivered (and copied) again"
                );
                requeue_later(&delivery.acker, &self.queue, tag, acks);
            }
        }
    }
}

/// Rejects without requeue: the broker's own dead-letter policy, if any,
/// takes the message.
async fn reject(delivery: &LapinDelivery, queue: &str, why: &str) {
    let outcome = delivery
        .acker
        .reject(BasicRejectOptions { requeue: false })
        .await;
    match outcome {
        Ok(true) => tracing::warn!(
            queue,
            why,
            "rejected a malformed message without requeue; the broker's dead-letter policy for the queue applies"
        ),
        other => {
            tracing::error!(queue, why, outcome = ?other, "could not reject a malformed message")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_have_the_documented_shape() {
        let tag = consumer_tag("app.emails");
        let parts: Vec<&str> = tag.splitn(2, '.').collect();
        assert_eq!(parts[0], "queuey");
        let rest = tag.strip_prefix("queuey.app.emails.").unwrap();
        let (nanos, sequence) = rest.split_once('.').unwrap();
        assert!(u128::from_str_radix(nanos, 16).is_ok(), "{tag}");
        assert!(sequence.parse::<u64>().is_ok(), "{tag}");
    }

    #[test]
    fn tags_are_unique() {
        assert_ne!(consumer_tag("q"), consumer_tag("q"));
    }

    #[test]
    fn long_queue_names_are_cut_to_160_bytes_on_a_char_boundary() {
        let queue = "é".repeat(120); // 240 bytes
        let tag = consumer_tag(&queue);
        let part = tag.strip_prefix("queuey.").unwrap();
        let cut = &part[..part.rfind('.').unwrap()];
        let cut = &cut[..cut.rfind('.').unwrap()];
        assert_eq!(cut.len(), 160);
        assert!(tag.len() <= 255);
        assert_eq!(truncate("abc", 160), "abc");
        assert_eq!(truncate("aé", 2), "a");
    }
}
