//! Consuming a queue: a fresh channel per consumer, its prefetch, its tag,
//! and the handling of bodies that are not envelopes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::{FieldTable, ShortString};
use queuey_core::backend::MALFORMED_ENVELOPE_REASON;
use queuey_core::{DecodeError, Delivery, DeliveryStream, Envelope, Error, QueueConfig};

use crate::backend::Inner;
use crate::delivery::{RabbitMqDelivery, requeue_later};
use crate::error::{Failure, connection_lost};
use crate::properties::{self, DeadLetterInfo};
use crate::publisher::Outgoing;
use crate::topology;

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
/// `basic_qos(prefetch, global = false)` set before `basic_consume`.
pub(crate) async fn consume(
    inner: Arc<Inner>,
    config: &QueueConfig,
) -> Result<DeliveryStream, Error> {
    config.validate()?;
    let queue = config.name();
    let what = format!("consuming `{queue}`");
    inner.check_open(format_args!("{what}"))?;
    let connection = &inner.connection;
    let fail = |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(&what);
    let channel = connection.create_channel().await.map_err(fail)?;
    channel
        .basic_qos(config.prefetch_count(), BasicQosOptions { global: false })
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
    tracing::debug!(queue, consumer_tag = %tag, prefetch = config.prefetch_count(), "consuming");
    let state = Consumer {
        inner,
        channel,
        queue: Arc::from(queue),
        tag,
        consumer,
        ended: false,
    };
    Ok(futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
    .boxed())
}

struct Consumer {
    inner: Arc<Inner>,
    channel: lapin::Channel,
    queue: Arc<str>,
    tag: String,
    consumer: lapin::Consumer,
    ended: bool,
}

impl Consumer {
    async fn next(&mut self) -> Option<Result<Box<dyn Delivery>, Error>> {
        if self.ended {
            return None;
        }
        loop {
            match self.consumer.next().await {
                Some(Ok(delivery)) => match Envelope::decode(&delivery.data) {
                    Ok(envelope) => {
                        return Some(Ok(Box::new(RabbitMqDelivery::new(
                            Arc::clone(&self.inner),
                            self.channel.clone(),
                            Arc::clone(&self.queue),
                            envelope,
                            delivery,
                        ))));
                    }
                    Err(error) => self.malformed(delivery, error).await,
                },
                Some(Err(e)) => {
                    self.ended = true;
                    if self.inner.is_closed() {
                        return None;
                    }
                    let alive = self.inner.connection.status().connected();
                    let error =
                        Failure::of(&e, alive).into_error(&format!("consuming `{}`", self.queue));
                    tracing::error!(queue = %self.queue, consumer_tag = %self.tag, %error, "consumer failed");
                    return Some(Err(error));
                }
                None => {
                    self.ended = true;
                    if self.inner.is_closed() {
                        return None;
                    }
                    if !self.inner.connection.status().connected() {
                        // The connection went away without an error item.
                        return Some(Err(connection_lost(&format!("consuming `{}`", self.queue))));
                    }
                    // We never cancel a consumer that is still being polled,
                    // so this came from the broker (the queue was deleted).
                    tracing::warn!(
                        queue = %self.queue,
                        consumer_tag = %self.tag,
                        "the broker cancelled the consumer (was the queue deleted?); the stream ends"
                    );
                    return None;
                }
            }
        }
    }

    /// Copies a body that is not an envelope to the dead-letter queue and
    /// acknowledges it; it never reaches the stream.
    async fn malformed(&self, delivery: LapinDelivery, error: DecodeError) {
        let queue = &*self.queue;
        let tag = delivery.delivery_tag;
        tracing::warn!(queue, delivery_tag = tag, %error, "a message body is not a job envelope");
        let Some(suffix) = self.inner.options.dead_suffix_in_use() else {
            reject(&delivery, queue, "dead-letter queues are off").await;
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
        let published = self
            .inner
            .send(Outgoing {
                queue: &dead,
                body: &delivery.data,
                message_id: &message_id,
                properties: properties::with_dead_letter_headers(
                    properties::malformed_properties(&message_id),
                    &info,
                ),
            })
            .await;
        match published {
            Ok(()) => match delivery.acker.ack(BasicAckOptions::default()).await {
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
                requeue_later(&delivery.acker, &self.queue, tag);
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
