//! The poison guard: a job that keeps killing its worker ends in the
//! dead-letter queue instead of being delivered for ever.
//!
//! A delivery the broker marks `redelivered` went out before and came back
//! unsettled: its worker died, lost its connection, or handed it back. Such
//! a delivery is not given to the worker. Its count
//! ([`UNSETTLED_DELIVERIES_HEADER`], absent = 0) goes up by one and the
//! job is published, with the new count, to the work queue's suspect queue
//! (below the limit) or to its dead-letter queue (at the limit); only then
//! is the delivery acknowledged. A crash between the two leaves two copies,
//! never none.
//!
//! The suspect queue is consumed by every consumer of the work queue, on a
//! channel of its own with a prefetch of 1, so a suspect runs alone: when
//! it kills its worker again, the jobs prefetched from the work queue
//! beside it come back once, are moved to the suspect queue once and then
//! run one at a time, while the poison job climbs to the limit by itself.
//! A first delivery costs nothing; a redelivery costs one confirmed publish
//! and an acknowledgement.
//!
//! [`UNSETTLED_DELIVERIES_HEADER`]: crate::topology::UNSETTLED_DELIVERIES_HEADER

mod count;

use std::sync::Arc;

use bytes::Bytes;
use lapin::BasicProperties;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::{BasicAckOptions, BasicQosOptions, BasicRejectOptions};
use queuey_core::{BackendErrorKind, Envelope, Error, QueueConfig};

use crate::acks::Acks;
use crate::backend::{Inner, timed_out};
use crate::declare;
use crate::delivery::requeue_later;
use crate::properties::{self, DeadLetterInfo};
use crate::publisher::Outgoing;
use crate::topology;
use count::Verdict;

/// Counter: jobs moved to their suspect queue after a delivery came back
/// unsettled.
pub(crate) const SUSPECTS_TOTAL: &str = "queuey_rabbitmq_suspects_total";
/// Counter: jobs the poison guard dead-lettered.
pub(crate) const POISON_DEAD_LETTERS_TOTAL: &str = "queuey_rabbitmq_poison_dead_letters_total";

/// The guard of one consumer of a work queue (or of its suspect queue).
pub(crate) struct Guard {
    pub(crate) inner: Arc<Inner>,
    /// The work queue.
    pub(crate) config: QueueConfig,
    /// The channel the delivery came on, and its consumer's prefetch.
    pub(crate) channel: lapin::Channel,
    pub(crate) prefetch: u16,
    /// The writer of the channel's acknowledgements, told of every settle
    /// the guard makes with the delivery's own acker.
    pub(crate) acks: Acks,
}

impl Guard {
    /// Takes a delivery that came back unsettled (`redelivered`) from the
    /// work queue or the suspect queue: publishes it to the suspect queue or
    /// the dead-letter queue, then acknowledges it, and waits until the
    /// broker has the acknowledgement. On failure the delivery is handed
    /// back to the broker after a pause, to be judged again (its count
    /// unchanged).
    pub(crate) async fn divert(&self, mut delivery: LapinDelivery, envelope: &Envelope) {
        let inner = &*self.inner;
        let Some((suffix, limit)) = inner.options.guard_in_use() else {
            return;
        };
        let queue = self.config.name();
        let tag = delivery.delivery_tag;
        let job_id = envelope.job_id;
        let recorded = count::recorded(&delivery.properties).unwrap_or_else(|found| {
            tracing::warn!(
                queue,
                %job_id,
                header = topology::UNSETTLED_DELIVERIES_HEADER,
                found,
                "the unsettled-deliveries header is not a count; counting from 0"
            );
            0
        });
        let body = Bytes::from(std::mem::take(&mut delivery.data));
        let verdict = count::verdict(recorded, limit);
        let (published, metric) = match &verdict {
            Verdict::Suspect { count } => {
                let suspect = topology::suspect_queue_name(queue, suffix);
                let properties = properties::with_unsettled_deliveries(
                    carried(envelope, &delivery.properties),
                    *count,
                );
                let out = Outgoing {
                    queue: suspect,
                    body,
                    message_id: job_id.to_string(),
                    properties,
                };
                (self.publish_suspect(inner, out).await, SUSPECTS_TOTAL)
            }
            Verdict::DeadLetter { count, reason } => {
                tracing::warn!(
                    queue,
                    job_type = %envelope.job_type,
                    %job_id,
                    attempt = envelope.attempt,
                    unsettled_deliveries = count,
                    %reason,
                    "job dead-lettered by the poison guard"
                );
                let Some(dead_suffix) = inner.options.dead_suffix_in_use() else {
                    reject(inner, &delivery, queue, &self.acks).await;
                    return;
                };
                let info = DeadLetterInfo {
                    reason,
                    original_queue: queue,
                    attempts: envelope.attempt,
                };
                let properties = properties::with_unsettled_deliveries(
                    properties::with_dead_letter_headers(
                        properties::job_properties(envelope, 0),
                        &info,
                    ),
                    *count,
                );
                let out = Outgoing {
                    queue: topology::dead_letter_queue_name(queue, dead_suffix),
                    body,
                    message_id: job_id.to_string(),
                    properties,
                };
                (
                    inner.send_dead_letter(out, &self.config).await,
                    POISON_DEAD_LETTERS_TOTAL,
                )
            }
        };
        if let Err(error) = published {
            tracing::error!(
                queue,
                %job_id,
                %error,
                "could not move a job that came back unsettled; it goes back to the broker, to be \
                 judged again"
            );
            requeue_later(&delivery.acker, &Arc::from(queue), tag, &self.acks);
            return;
        }
        let bound = inner.options.call_timeout;
        let acknowledged = async {
            let acked = delivery.acker.ack(BasicAckOptions::default()).await;
            // Out (or the channel is gone): later runs may reach past it.
            self.acks.settled(tag);
            let acked = acked?;
            // An ack has no answer; a synchronous call on the same channel
            // (setting the same prefetch again) returns once the broker has
            // processed everything before it, the ack included.
            if acked {
                self.channel
                    .basic_qos(self.prefetch, BasicQosOptions { global: false })
                    .await?;
            }
            Ok::<_, lapin::Error>(acked)
        };
        match tokio::time::timeout(bound, acknowledged).await {
            Ok(Ok(true)) => {
                metrics::counter!(metric, "queue" => queue.to_owned()).increment(1);
                if let Verdict::Suspect { count } = verdict {
                    tracing::info!(
                        queue,
                        %job_id,
                        unsettled_deliveries = count,
                        limit,
                        "a job came back without being settled; moved to the suspect queue"
                    );
                }
            }
            other => tracing::error!(
                queue,
                %job_id,
                delivery_tag = tag,
                outcome = ?other.map_err(|_| timed_out("acknowledging", bound)),
                "a job was moved by the poison guard but its delivery could not be acknowledged; \
                 the broker delivers it again, so it exists twice"
            ),
        }
    }

    /// Publishes to the suspect queue; when it is gone (an operator deleted
    /// it), declares it and publishes once more.
    async fn publish_suspect(&self, inner: &Inner, out: Outgoing) -> Result<(), Error> {
        match inner.send(out.clone()).await {
            Err(Error::Backend(e)) if e.kind() == BackendErrorKind::Unroutable => {
                tracing::warn!(suspect_queue = %out.queue, "the suspect queue is gone; declaring it again");
                let what = format!("declaring suspect queue `{}` again", out.queue);
                let current = inner.link.connection(&what).await?;
                let bound = inner.options.call_timeout;
                let declaring = declare::declare_suspect_queue(
                    &current.connection,
                    &out.queue,
                    &inner.options,
                    &self.config,
                );
                let declared = match tokio::time::timeout(bound, declaring).await {
                    Ok(result) => result,
                    Err(_) => Err(timed_out(&what, bound)),
                };
                if let Err(error) = &declared {
                    inner.saw(current.generation, error);
                }
                declared?;
                inner.send(out).await
            }
            other => other,
        }
    }
}

/// The properties a suspect copy carries: persistence and the job id, as
/// for any job, plus queuey's own headers (its due time). No priority: a
/// suspect queue has none.
fn carried(envelope: &Envelope, original: &BasicProperties) -> BasicProperties {
    let properties = properties::job_properties(envelope, 0);
    let Some(headers) = original.headers() else {
        return properties;
    };
    let mut kept = lapin::types::FieldTable::default();
    for (key, value) in headers.inner() {
        if key.as_str().starts_with("queuey-") {
            kept.insert(key.clone(), value.clone());
        }
    }
    properties.with_headers(kept)
}

/// Rejects without requeue when dead-letter queues are off: the broker's
/// own dead-letter policy for the queue applies.
async fn reject(inner: &Inner, delivery: &LapinDelivery, queue: &str, acks: &Acks) {
    let bound = inner.options.call_timeout;
    let rejecting = async {
        let rejected = delivery
            .acker
            .reject(BasicRejectOptions { requeue: false })
            .await;
        acks.settled(delivery.delivery_tag);
        rejected
    };
    match tokio::time::timeout(bound, rejecting).await {
        Ok(Ok(true)) => {
            metrics::counter!(POISON_DEAD_LETTERS_TOTAL, "queue" => queue.to_owned()).increment(1);
            tracing::warn!(
                queue,
                "dead-letter queues are off: rejected the job without requeue, so the broker's \
                 own dead-letter policy for the queue applies"
            );
        }
        other => tracing::error!(
            queue,
            outcome = ?other.map_err(|_| timed_out("rejecting", bound)),
            "could not reject a job the poison guard gave up on; the broker delivers it again"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::PlainProperties;
    use lapin::types::{AMQPValue, FieldTable, LongString};

    #[test]
    fn suspects_carry_the_job_id_persistence_and_queueys_own_headers_only() {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        let envelope = Envelope::new("t", "q", payload);
        let mut headers = FieldTable::default();
        headers.insert("queuey-due-at".into(), AMQPValue::LongLongInt(9));
        headers.insert(
            "x-death".into(),
            AMQPValue::LongString(LongString::from("x")),
        );
        headers.insert(
            topology::UNSETTLED_DELIVERIES_HEADER.into(),
            AMQPValue::LongLongInt(1),
        );
        let original = BasicProperties::default()
            .with_priority(4)
            .with_headers(headers);
        let read = PlainProperties::read(&properties::with_unsettled_deliveries(
            carried(&envelope, &original),
            2,
        ));
        assert_eq!(read.message_id, Some(envelope.job_id.to_string()));
        assert_eq!(read.delivery_mode, Some(2));
        assert_eq!(read.priority, None);
        assert_eq!(
            read.headers,
            vec![
                ("queuey-due-at".to_owned(), "i64:9".to_owned()),
                ("queuey-unsettled-deliveries".to_owned(), "i64:2".to_owned()),
            ]
        );
    }
}
