//! A body that is not a job envelope: copied verbatim to the dead-letter
//! queue (or rejected to the broker's own policy), never handed to the
//! worker.

use std::sync::Arc;

use bytes::Bytes;
use lapin::message::Delivery as LapinDelivery;
use queuey_core::DecodeError;
use queuey_core::backend::MALFORMED_ENVELOPE_REASON;
use queuey_core::escape::Untrusted;

use super::Consumer;
use super::acks::Acks;
use super::settle::Settler;
use crate::outbox::dead_letter;
use crate::properties::{self, DeadLetterInfo};

impl Consumer {
    /// Copies a body that is not an envelope to the dead-letter queue and
    /// acknowledges it; it never reaches the stream.
    pub(super) async fn malformed(&self, delivery: LapinDelivery, error: DecodeError, acks: Acks) {
        let queue = &*self.queue;
        let tag = delivery.delivery_tag;
        tracing::warn!(queue, delivery_tag = tag, error = %Untrusted(&error.to_string()), "a message body is not a job envelope");
        let options = self.outbox.options();
        let settler = Settler::new(
            delivery.acker,
            tag,
            acks,
            Arc::clone(&self.queue),
            options.call_timeout,
        );
        let Some(suffix) = options.dead_suffix_in_use() else {
            let why = "dead-letter queues are off";
            match settler.reject().await {
                Ok(()) => tracing::warn!(
                    queue,
                    why,
                    "rejected a malformed message without requeue; the broker's dead-letter policy for the queue applies"
                ),
                Err(error) => {
                    tracing::error!(queue, why, %error, "could not reject a malformed message")
                }
            }
            return;
        };
        let message_id = properties::message_id_or_new(&delivery.properties);
        let parse_error = error.to_string();
        let info = DeadLetterInfo {
            parse_error: Some(&parse_error),
            ..DeadLetterInfo::now(MALFORMED_ENVELOPE_REASON, queue, 0)
        };
        let letter = dead_letter::letter(
            &info,
            suffix,
            properties::malformed_properties(&message_id),
            message_id,
            Bytes::from(delivery.data),
        );
        let dead = letter.queue.clone();
        match self.outbox.dead_letter(letter, &self.config).await {
            Ok(()) => match settler.ack() {
                Ok(()) => {
                    tracing::info!(queue, dead_letter_queue = %dead, "malformed message moved to the dead-letter queue")
                }
                Err(error) => tracing::error!(
                    queue,
                    delivery_tag = tag,
                    %error,
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
                settler.requeue_later();
            }
        }
    }
}
