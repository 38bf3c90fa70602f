//! Sending each delivery where its route says: to the worker, back to its
//! hold, to the poison guard, or to the dead-letter queue.

use std::sync::Arc;
use std::time::Duration;

use lapin::message::Delivery as LapinDelivery;
use queuey_core::__private::now_ms;
use queuey_core::backend::{Delivery, HoldKind};
use queuey_core::escape::Untrusted;
use queuey_core::{DecodeError, Disposition, Envelope};

use super::acks::Acks;
use super::delivery::{Around, Origin, RabbitMqDelivery};
use super::guard::Guard;
use super::route::{Route, route};
use super::settle::Settler;
use super::{Consumer, Source};
use crate::rehold::Due;

/// Counter: jobs that came back from a hold before their due time and were
/// held again.
pub(crate) const REHOLDS_TOTAL: &str = "queuey_rabbitmq_reholds_total";

/// What a delivery needs beyond its decoding: the ways that wait.
// An errand is boxed whole where it is made (the rare path), so the size
// of its largest variant costs nothing on the common one.
#[allow(clippy::large_enum_variant)]
pub(super) enum Errand {
    /// Not an envelope: to the dead-letter queue.
    Malformed(LapinDelivery, DecodeError, Acks),
    /// A redelivery for the poison guard.
    Guard(LapinDelivery, Envelope, Acks),
    /// A job for the worker, while a move of the poison guard is under way.
    Gate(Box<RabbitMqDelivery>),
    /// A job for the worker in a moment: it waits that long first.
    Soon(Box<RabbitMqDelivery>, Duration),
    /// A job that came back from its hold early: to its hold again.
    HoldAgain {
        delivery: Box<RabbitMqDelivery>,
        remaining: Duration,
        due_at_ms: u64,
    },
    /// A job whose due time is garbage: to the dead-letter queue.
    Refuse(Box<RabbitMqDelivery>, String),
}

impl Consumer {
    /// Decodes a delivery: a job due now goes straight to the worker,
    /// anything else comes out as the errand that takes it where it goes.
    pub(super) fn dispatch_now(
        &mut self,
        mut delivery: LapinDelivery,
        acks: Acks,
    ) -> Result<Box<RabbitMqDelivery>, Box<Errand>> {
        // Only a delivery that came back unsettled meets the guard.
        let guarded = delivery.redelivered && self.outbox.options().guard_in_use().is_some();
        match route(&mut delivery.data, guarded, &delivery.properties, now_ms) {
            Route::Malformed(error) => Err(Box::new(Errand::Malformed(delivery, error, acks))),
            Route::Guard(envelope) => Err(Box::new(Errand::Guard(delivery, envelope, acks))),
            Route::Worker {
                envelope,
                around,
                due,
            } => {
                let delivery = self.delivery(delivery, envelope, around, acks);
                match due {
                    // Handed out only while no guard move is under way
                    // (see `Consumer::gate`).
                    Due::Now => match self.gate.try_write() {
                        Ok(_free) => Ok(delivery),
                        Err(_) => Err(Box::new(Errand::Gate(delivery))),
                    },
                    Due::Soon(remaining) => Err(Box::new(Errand::Soon(delivery, remaining))),
                    Due::Later {
                        remaining,
                        due_at_ms,
                    } => Err(Box::new(Errand::HoldAgain {
                        delivery,
                        remaining,
                        due_at_ms,
                    })),
                    Due::Absurd(reason) => Err(Box::new(Errand::Refuse(delivery, reason))),
                }
            }
        }
    }

    /// Runs a delivery's errand; returns the delivery when it goes to the
    /// worker after all.
    pub(super) async fn errand(&mut self, errand: Errand) -> Option<Box<RabbitMqDelivery>> {
        match errand {
            Errand::Malformed(delivery, error, acks) => self.malformed(delivery, error, acks).await,
            Errand::Guard(delivery, envelope, acks) => self.guard(delivery, envelope, acks).await,
            Errand::Gate(delivery) => return self.hand_over(delivery, Duration::ZERO).await,
            // Never early: it waits for the moment that remains.
            Errand::Soon(delivery, remaining) => return self.hand_over(delivery, remaining).await,
            Errand::HoldAgain {
                delivery,
                remaining,
                due_at_ms,
            } => self.hold_again(delivery, remaining, due_at_ms).await,
            Errand::Refuse(delivery, reason) => refuse(delivery, reason).await,
        }
        None
    }

    /// A job for the worker, once `wait` has passed and no guard move is
    /// under way (see `Consumer::gate`). Parked meanwhile, so that a stream
    /// dropped in the wait hands the delivery back.
    async fn hand_over(
        &mut self,
        delivery: Box<RabbitMqDelivery>,
        wait: Duration,
    ) -> Option<Box<RabbitMqDelivery>> {
        self.parked = Some(delivery);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let gate = Arc::clone(&self.gate);
        drop(gate.write().await);
        self.parked.take()
    }

    /// Decodes a delivery and sends it where it belongs, waiting for its
    /// errand if it has one; returns it when it goes to the worker.
    pub(super) async fn dispatch(
        &mut self,
        delivery: LapinDelivery,
        acks: Acks,
    ) -> Option<Box<RabbitMqDelivery>> {
        match self.dispatch_now(delivery, acks) {
            Ok(delivery) => Some(delivery),
            Err(errand) => Box::pin(self.errand(*errand)).await,
        }
    }

    /// The delivery of a decoded job, as the worker gets it.
    fn delivery(
        &self,
        delivery: LapinDelivery,
        envelope: Envelope,
        around: Around,
        acks: Acks,
    ) -> Box<RabbitMqDelivery> {
        // A job only reaches the suspect queue by coming back unsettled, and
        // one that came back once is published again with its count: either
        // is a redelivery to the worker.
        let suspect = matches!(self.source, Source::Suspects(_));
        let redelivered =
            delivery.redelivered || suspect || super::guard::returned_before(&delivery.properties);
        let origin = Origin {
            queue: Arc::clone(&self.consumed),
            suspect,
            priority: if suspect {
                0
            } else {
                self.config.top_priority()
            },
            properties: delivery.properties,
        };
        let settler = Settler::new(
            delivery.acker,
            delivery.delivery_tag,
            acks,
            Arc::clone(&self.queue),
            self.outbox.options().call_timeout,
        );
        Box::new(RabbitMqDelivery::new(
            Arc::clone(&self.outbox),
            settler,
            envelope,
            around,
            redelivered,
            origin,
        ))
    }

    /// Hands a redelivery to the poison guard, on a task of its own.
    async fn guard(&self, delivery: LapinDelivery, envelope: Envelope, acks: Acks) {
        // Moves run side by side (a slow confirmation must not hold up the
        // next one); each holds the gate shared until its ack is in.
        let moving = Arc::clone(&self.gate).read_owned().await;
        let guard = Guard {
            outbox: Arc::clone(&self.outbox),
            config: self.config.clone(),
            prefetch: self.prefetch(),
        };
        tokio::spawn(async move {
            guard.divert(delivery, &envelope, acks).await;
            drop(moving);
        });
    }

    /// Holds a job that came back early again for what remains, then
    /// acknowledges its delivery. On failure the delivery is dropped
    /// unsettled, and the broker delivers it again later.
    async fn hold_again(
        &self,
        delivery: Box<RabbitMqDelivery>,
        remaining: Duration,
        due_at_ms: u64,
    ) {
        let queue = delivery.queue().to_owned();
        let envelope = delivery.envelope().clone().for_queue(&queue);
        if self.outbox.options().settings().job_exchange().is_some() {
            // Through a job exchange, producers send jobs for later straight
            // to the work queue: holding them here is the normal path.
            tracing::debug!(
                queue,
                job_id = %envelope.job_id,
                early_by = ?remaining,
                "a job arrived before its due time; holding it for the rest"
            );
        } else {
            tracing::info!(
                queue,
                job_id = %envelope.job_id,
                early_by = ?remaining,
                "a job came back from its hold before its due time (a policy shortening hold \
                 queues, a delay longer than one hold, or a clock ahead of the broker's); \
                 holding it again for the rest"
            );
        }
        let held = self
            .outbox
            .hold_until(&envelope, remaining, due_at_ms, HoldKind::Retry)
            .await;
        let result = match held {
            Ok(()) => delivery.ack().await,
            Err(error) => Err(error),
        };
        match result {
            Ok(()) => metrics::counter!(REHOLDS_TOTAL, "queue" => queue).increment(1),
            Err(error) => tracing::error!(
                queue,
                %error,
                "could not hold an early job again; the broker keeps it and delivers it again"
            ),
        }
    }
}

/// Dead-letters a job whose due time is garbage.
async fn refuse(delivery: Box<RabbitMqDelivery>, reason: String) {
    let queue = delivery.queue().to_owned();
    tracing::warn!(queue, reason = %Untrusted(&reason), "dead-lettering a job with an absurd due time");
    if let Err(error) = delivery.settle(Disposition::DeadLetter { reason }).await {
        tracing::error!(queue, %error, "could not dead-letter a job with an absurd due time; the broker keeps it");
    }
}
