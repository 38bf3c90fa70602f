//! A delivered job and how it is settled.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use lapin::BasicProperties;
use queuey_core::Disposition;
use queuey_core::backend::Delivery;
use queuey_core::backend::Plan;
use queuey_core::{Envelope, Error, QueueConfig};

use super::settle::Settler;
use crate::outbox::{Outbox, dead_letter, hand_back};
use crate::properties::{self, DeadLetterInfo};

/// One delivery from a consumer. Publishing (a retry, deferral, dead
/// letter or hand-back) always comes before the acknowledgement, and any
/// failure leaves the delivery unacknowledged; one dropped unsettled is
/// handed back after [`REQUEUE_DELAY`](crate::options::REQUEUE_DELAY).
pub(crate) struct RabbitMqDelivery {
    outbox: Arc<Outbox>,
    /// Its tag, acker and channel, which stays open until it is settled.
    settler: Settler,
    envelope: Envelope,
    /// The body as received without the payload, which the envelope holds:
    /// with it, the body is republished verbatim to the dead-letter queue.
    around: Around,
    redelivered: bool,
    /// Where it came from, to hand it back there.
    origin: Origin,
    /// Whether a settle was sent or handed to the writer. The acker alone
    /// cannot tell: an acknowledgement covered by a multiple one leaves it
    /// unused.
    settled: AtomicBool,
}

impl RabbitMqDelivery {
    /// A delivery whose body decoded as `envelope`, with the bytes of the
    /// body around its payload. The body itself is not kept.
    pub(crate) fn new(
        outbox: Arc<Outbox>,
        settler: Settler,
        envelope: Envelope,
        around: Around,
        redelivered: bool,
        origin: Origin,
    ) -> Self {
        RabbitMqDelivery {
            outbox,
            settler,
            envelope,
            around,
            redelivered,
            origin,
            settled: AtomicBool::new(false),
        }
    }

    /// The queue the delivery was consumed from.
    pub(crate) fn queue(&self) -> &str {
        self.settler.queue()
    }

    /// Acknowledges through the channel's writer, which may cover this
    /// delivery with a multiple acknowledgement.
    fn ack_now(&self) -> Result<(), Error> {
        self.settled.store(true, Ordering::Relaxed);
        self.settler.ack()
    }

    /// The configuration of the work queue, as declared through this
    /// backend (or the defaults, for a queue consumed without a declare).
    fn config(&self) -> Arc<QueueConfig> {
        let queue = self.queue();
        self.outbox
            .declared(queue)
            .unwrap_or_else(|| Arc::new(QueueConfig::new(queue)))
    }

    /// Hands the job back without the broker counting a redelivery: a copy
    /// is published to the queue the delivery came from, then the delivery
    /// is acknowledged; if the copy cannot be published, the delivery goes
    /// back with `basic.nack` (requeue) instead.
    pub(crate) async fn hand_back_now(&self) -> Result<(), Error> {
        self.settled.store(true, Ordering::Relaxed);
        let origin = &self.origin;
        let copy = hand_back::copy(
            &origin.queue,
            &self.envelope,
            &origin.properties,
            origin.priority,
            self.around.rebuild(&self.envelope),
        );
        let config = self.config();
        match self.outbox.hand_back(copy, &config, origin.suspect).await {
            Ok(()) => self.settler.ack(),
            Err(error) => {
                tracing::warn!(
                    queue = %origin.queue,
                    job_id = %self.envelope.job_id,
                    %error,
                    "could not hand a job back as a new message; handing the delivery back to the \
                     broker instead, which marks it redelivered"
                );
                self.settler.requeue().await
            }
        }
    }

    async fn dead_letter_now(&self, reason: String) -> Result<(), Error> {
        let queue = self.queue();
        let Some(suffix) = self.outbox.options().dead_suffix_in_use() else {
            tracing::warn!(
                queue,
                job_id = %self.envelope.job_id,
                reason = properties::cap_reason(&reason),
                "dead-letter queues are off: rejecting without requeue, so the broker's own \
                 dead-letter policy for the queue applies"
            );
            self.settled.store(true, Ordering::Relaxed);
            return self.settler.reject().await;
        };
        let info = DeadLetterInfo::now(&reason, queue, self.envelope.attempt);
        let letter = dead_letter::letter(
            &info,
            suffix,
            // A dead-letter queue has no priorities.
            properties::job_properties(&self.envelope, 0),
            self.envelope.job_id.to_string(),
            self.around.rebuild(&self.envelope),
        );
        self.outbox.dead_letter(letter, &self.config()).await?;
        self.ack_now()
    }
}

/// The settle of a delivery whose acknowledgement was handed to the
/// channel's writer: done already.
struct Acked;

impl Future for Acked {
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(()))
    }
}

/// Where a delivery came from, and how it goes back there.
#[derive(Debug)]
pub(crate) struct Origin {
    /// The queue it was consumed from: the work queue, or its suspect
    /// queue.
    pub(crate) queue: Arc<str>,
    /// Whether that is the suspect queue.
    pub(crate) suspect: bool,
    /// The priority of a copy handed back: the work queue's top one, so the
    /// job is served ahead of the backlog as it was before (0 for a suspect
    /// queue or a queue without priorities).
    pub(crate) priority: u8,
    /// The properties it was delivered with: queuey's own headers travel on.
    pub(crate) properties: BasicProperties,
}

/// The bytes of a body before and after its payload.
#[derive(Debug)]
pub(crate) struct Around {
    bytes: Vec<u8>,
    /// Where the payload went.
    split: usize,
}

impl Around {
    /// `bytes`: a body without its payload, which was cut out at `split`.
    pub(crate) fn new(bytes: Vec<u8>, split: usize) -> Self {
        Around { bytes, split }
    }

    /// The body as received: these bytes around the envelope's payload.
    pub(crate) fn rebuild(&self, envelope: &Envelope) -> Bytes {
        let payload = envelope.payload.get().as_bytes();
        let mut body = Vec::with_capacity(self.bytes.len() + payload.len());
        body.extend_from_slice(&self.bytes[..self.split]);
        body.extend_from_slice(payload);
        body.extend_from_slice(&self.bytes[self.split..]);
        Bytes::from(body)
    }
}

impl Delivery for RabbitMqDelivery {
    fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    fn redelivered(&self) -> bool {
        self.redelivered
    }

    fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        // A dead letter's body is rebuilt from the bytes around the
        // payload, so it stays as delivered; holds re-encode the envelope.
        Some(&mut self.envelope)
    }

    fn settle(self: Box<Self>, disposition: Disposition) -> BoxFuture<'static, Result<(), Error>> {
        // A future of its own for each plan: the acknowledgement, by far the
        // most common, does not carry (nor copy) the room the publishing
        // plans need.
        match disposition.plan(&self.envelope, self.queue()) {
            Plan::Ack => match self.ack_now() {
                // Boxing a future without a size allocates nothing.
                Ok(()) => Box::pin(Acked),
                Err(error) => Box::pin(std::future::ready(Err(error))),
            },
            Plan::Hold { next, delay, kind } => Box::pin(async move {
                self.outbox.hold(&next, delay, kind).await?;
                self.ack_now()
            }),
            Plan::DeadLetter { reason } => {
                Box::pin(async move { self.dead_letter_now(reason).await })
            }
            Plan::Requeue => Box::pin(async move { self.hand_back_now().await }),
        }
    }
}

impl Drop for RabbitMqDelivery {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Relaxed) {
            self.settler.requeue_later();
        }
    }
}

impl fmt::Debug for RabbitMqDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqDelivery")
            .field("queue", self.settler.queue())
            .field("delivery_tag", &self.settler.tag())
            .field("redelivered", &self.redelivered)
            .field("envelope", &self.envelope)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_rebuilt_byte_for_byte() {
        let small = br#"{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8", "payload" : [1,  2],"job_type":"t","queue":"q","attempt":1}"#.to_vec();
        // A payload kept in the body's own memory, with odd spacing around
        // and inside it.
        let large = format!(
            r#"{{ "attempt":1, "payload" :  {{ "s" : "{}", "n": [1 ,2] }} ,"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q" }}"#,
            "é".repeat(3_000)
        )
        .into_bytes();
        for body in [small, large] {
            let (envelope, bytes, split) = Envelope::decode_taking(body.clone()).unwrap();
            let around = Around { bytes, split };
            assert_eq!(
                around.bytes.len() + envelope.payload.get().len(),
                body.len()
            );
            assert_eq!(&around.rebuild(&envelope)[..], &body[..]);
        }
    }
}
