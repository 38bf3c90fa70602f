//! The poison guard: a job that keeps killing its worker ends in the
//! dead-letter queue instead of being delivered for ever.
//!
//! A delivery the broker marks `redelivered` went out before and came back
//! unsettled: its worker died, lost its connection, or handed it back, or
//! the broker restarted (a classic queue marks its whole recovered backlog
//! so). Such a delivery is not given to the worker. Its count
//! ([`UNSETTLED_DELIVERIES_HEADER`], absent = 0) goes up by one and the
//! job is published, with the new count: at a first return back to its
//! work queue, at later ones to the work queue's suspect queue, at the
//! limit to its dead-letter queue; only then is the delivery acknowledged.
//! A crash between the two leaves two copies, never none.
//!
//! A first return costs the job only a place in the queue (after a lost
//! connection jobs come back by the thousand, nearly all innocent). The
//! suspect queue is consumed by every consumer of the work queue with a
//! prefetch of 1, so a job that came back twice runs alone: the jobs
//! prefetched beside it come back once, while the poison job climbs to the
//! limit by itself. A redelivery costs one confirmed publish and an
//! acknowledgement.
//!
//! [`UNSETTLED_DELIVERIES_HEADER`]: crate::topology::UNSETTLED_DELIVERIES_HEADER

mod count;

use std::sync::Arc;

use bytes::Bytes;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::BasicQosOptions;
use queuey_core::escape::Untrusted;
use queuey_core::{Envelope, Error, QueueConfig};

use super::acks::Acks;
use super::settle::Settler;
use crate::error::Failure;
use crate::outbox::{Outbox, dead_letter, hand_back, suspect};
use crate::properties::{self, DeadLetterInfo};
use crate::{bound, topology};
use count::Verdict;
pub(super) use count::returned_before;

/// Counter: jobs published again to their work queue after a delivery
/// came back unsettled for the first time.
pub(crate) const FIRST_RETURNS_TOTAL: &str = "queuey_rabbitmq_first_returns_total";
/// Counter: jobs moved to their suspect queue after a delivery came back
/// unsettled again.
pub(crate) const SUSPECTS_TOTAL: &str = "queuey_rabbitmq_suspects_total";
/// Counter: jobs the poison guard dead-lettered.
pub(crate) const POISON_DEAD_LETTERS_TOTAL: &str = "queuey_rabbitmq_poison_dead_letters_total";

/// The guard of one consumer of a work queue (or of its suspect queue).
pub(crate) struct Guard {
    pub(crate) outbox: Arc<Outbox>,
    /// The work queue.
    pub(crate) config: QueueConfig,
    /// The prefetch of the consumer the delivery came from.
    pub(crate) prefetch: u16,
}

impl Guard {
    /// Takes a delivery that came back unsettled: publishes it where its
    /// verdict says, then acknowledges it and waits until the broker has the
    /// acknowledgement. On failure it is handed back after a pause, to be
    /// judged again (its count unchanged).
    pub(crate) async fn divert(
        &self,
        mut delivery: LapinDelivery,
        envelope: &Envelope,
        acks: Acks,
    ) {
        let options = self.outbox.options();
        let Some((suffix, limit)) = options.guard_in_use() else {
            return;
        };
        let queue = self.config.name();
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
        let settler = Settler::new(
            delivery.acker,
            delivery.delivery_tag,
            acks,
            Arc::from(queue),
            options.call_timeout,
        );
        let verdict = count::verdict(recorded, limit);
        let original = &delivery.properties;
        let (published, metric) = match &verdict {
            Verdict::Again { count } => {
                let mut copy = hand_back::copy(queue, envelope, original, envelope.priority, body);
                copy.properties = properties::with_unsettled_deliveries(copy.properties, *count);
                let sent = self.outbox.hand_back(copy, &self.config, false).await;
                (sent, FIRST_RETURNS_TOTAL)
            }
            Verdict::Suspect { count } => {
                let copy = suspect::copy(queue, envelope, original, suffix, *count, body);
                let sent = self.outbox.suspect(copy, &self.config).await;
                (sent, SUSPECTS_TOTAL)
            }
            Verdict::DeadLetter { count, reason } => {
                tracing::warn!(
                    queue,
                    job_type = %Untrusted(&envelope.job_type),
                    %job_id,
                    attempt = envelope.attempt,
                    unsettled_deliveries = count,
                    reason = %Untrusted(reason),
                    "job dead-lettered by the poison guard"
                );
                let Some(dead_suffix) = options.dead_suffix_in_use() else {
                    reject(&settler, queue).await;
                    return;
                };
                let info = DeadLetterInfo::now(reason, queue, envelope.attempt);
                let mut letter = dead_letter::letter(
                    &info,
                    dead_suffix,
                    properties::job_properties(envelope, 0),
                    job_id.to_string(),
                    body,
                );
                letter.properties =
                    properties::with_unsettled_deliveries(letter.properties, *count);
                let sent = self.outbox.dead_letter(letter, &self.config).await;
                (sent, POISON_DEAD_LETTERS_TOTAL)
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
            settler.requeue_later();
            return;
        }
        match self.acknowledge(&settler).await {
            Ok(()) => {
                metrics::counter!(metric, "queue" => queue.to_owned()).increment(1);
                match verdict {
                    // One line per job would flood the log after a broker
                    // restart: the counter tells how many.
                    Verdict::Again { count } => tracing::debug!(
                        queue,
                        %job_id,
                        unsettled_deliveries = count,
                        limit,
                        "a job came back without being settled for the first time; published \
                         again to its work queue"
                    ),
                    Verdict::Suspect { count } => tracing::info!(
                        queue,
                        %job_id,
                        unsettled_deliveries = count,
                        limit,
                        "a job came back without being settled again; moved to the suspect queue"
                    ),
                    Verdict::DeadLetter { .. } => {}
                }
            }
            Err(error) => tracing::error!(
                queue,
                %job_id,
                delivery_tag = settler.tag(),
                %error,
                "a job was moved by the poison guard but its delivery could not be acknowledged; \
                 the broker delivers it again, so it exists twice"
            ),
        }
    }

    /// Acknowledges a moved delivery and waits until the broker has
    /// processed the acknowledgement.
    async fn acknowledge(&self, settler: &Settler) -> Result<(), Error> {
        // Out (or the channel is gone): later runs may reach past it.
        settler.ack_alone().await?;
        // An ack has no answer; a synchronous call on the same channel
        // (setting the same prefetch again) returns once the broker has
        // processed everything before it, the ack included.
        let channel = settler.channel();
        let what = "confirming an acknowledgement";
        let confirming = async {
            channel
                .basic_qos(self.prefetch, BasicQosOptions { global: false })
                .await
                .map_err(|e| Failure::of(&e, channel.status().connected()).into_error(what))
        };
        bound::within(self.outbox.options().call_timeout, what, confirming).await
    }
}

/// Rejects without requeue when dead-letter queues are off: the broker's
/// own dead-letter policy for the queue applies.
async fn reject(settler: &Settler, queue: &str) {
    match settler.reject().await {
        Ok(()) => {
            metrics::counter!(POISON_DEAD_LETTERS_TOTAL, "queue" => queue.to_owned()).increment(1);
            tracing::warn!(
                queue,
                "dead-letter queues are off: rejected the job without requeue, so the broker's \
                 own dead-letter policy for the queue applies"
            );
        }
        Err(error) => tracing::error!(
            queue,
            %error,
            "could not reject a job the poison guard gave up on; the broker delivers it again"
        ),
    }
}
