//! A delivered job and how it is settled.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use lapin::Acker;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::{BasicNackOptions, BasicRejectOptions};
use queuey_core::backend::{Disposition, Plan};
use queuey_core::{BackendError, BackendErrorKind, Delivery, Envelope, Error, QueueConfig};

use crate::acks::Acks;
use crate::backend::{Inner, timed_out};
use crate::error::Failure;
use crate::properties::{self, DeadLetterInfo};
use crate::publisher::Outgoing;
use crate::topology;

/// How long a delivery that was dropped unsettled — its retry, deferral or
/// dead letter failed, or its job was abandoned — stays unacknowledged before
/// it is handed back to the broker (`basic.nack` with requeue) for delivery
/// again.
///
/// Left unacknowledged for good, it would hold one of its consumer's
/// prefetch slots until the channel closed, and a few such failures would
/// stall the consumer. The pause keeps a failure that repeats (a hold queue
/// someone declared with other arguments, say) from becoming a busy loop.
pub const REQUEUE_DELAY: Duration = Duration::from_secs(1);

/// Counter: settles refused because the delivery's channel was gone (it came
/// on a connection that has since died); the broker delivers those again.
pub(crate) const STALE_SETTLES: &str = "queuey_rabbitmq_stale_settles_total";

/// One delivery from a consumer.
///
/// Publishing (a retry, deferral or dead letter) always comes before the
/// acknowledgement, and any failure leaves the delivery unacknowledged. A
/// delivery dropped unsettled is handed back to the broker after
/// [`REQUEUE_DELAY`]; if its channel closes first, the broker delivers it
/// again anyway.
pub(crate) struct RabbitMqDelivery {
    inner: Arc<Inner>,
    /// The writer of the consumer channel's acknowledgements. It also
    /// keeps the channel open until this delivery is settled, so dropping
    /// the stream first does not requeue work in progress.
    acks: Acks,
    queue: Arc<str>,
    envelope: Envelope,
    /// The body as received without the payload, which the envelope holds:
    /// with it, the body is republished verbatim to the dead-letter queue.
    around: Around,
    redelivered: bool,
    delivery_tag: u64,
    acker: Acker,
    /// Whether a settle was sent or handed to the writer. The acker alone
    /// cannot tell: an acknowledgement covered by a multiple one leaves it
    /// unused.
    settled: AtomicBool,
}

impl RabbitMqDelivery {
    /// The queue the delivery was consumed from.
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    /// A delivery whose body decoded as `envelope`, with the bytes of the
    /// body around its payload. The body itself is not kept.
    pub(crate) fn new(
        inner: Arc<Inner>,
        acks: Acks,
        queue: Arc<str>,
        envelope: Envelope,
        around: Around,
        delivery: LapinDelivery,
    ) -> Self {
        RabbitMqDelivery {
            inner,
            acks,
            queue,
            envelope,
            around,
            redelivered: delivery.redelivered,
            delivery_tag: delivery.delivery_tag,
            acker: delivery.acker,
            settled: AtomicBool::new(false),
        }
    }

    /// Turns the result of an ack, nack or reject into queuey's. The error
    /// text is only built for an error: a settle that worked allocates
    /// nothing here.
    fn settled(&self, what: &str, result: lapin::Result<bool>) -> Result<(), Error> {
        let what = || {
            format!(
                "{what} delivery {} from `{}`",
                self.delivery_tag, self.queue
            )
        };
        match result {
            Ok(true) => Ok(()),
            Ok(false) => {
                metrics::counter!(STALE_SETTLES, "queue" => self.queue.to_string()).increment(1);
                Err(Error::Backend(BackendError::new(
                    BackendErrorKind::NotSettled,
                    format!(
                        "{}: not settled, because its channel is closed (the connection it came \
                         on is gone) or it was settled already; the broker will deliver it again",
                        what()
                    ),
                )))
            }
            Err(e) => {
                Err(Failure::of(&e, self.acks.channel().status().connected()).into_error(&what()))
            }
        }
    }

    /// Runs one ack, nack or reject within the call bound. An ack that
    /// cannot complete (its connection is silently gone) fails instead of
    /// holding its caller: the broker delivers the message again anyway.
    async fn bounded(
        &self,
        what: &str,
        call: impl std::future::Future<Output = lapin::Result<bool>>,
    ) -> Result<(), Error> {
        let bound = self.inner.options.call_timeout;
        match tokio::time::timeout(bound, call).await {
            Ok(result) => self.settled(what, result),
            Err(_) => Err(timed_out(
                &format!(
                    "{what} delivery {} from `{}`",
                    self.delivery_tag, self.queue
                ),
                bound,
            )),
        }
    }

    /// Acknowledges through the channel's writer, which may cover this
    /// delivery with a multiple acknowledgement (see [`Acks`]).
    async fn ack_now(&self) -> Result<(), Error> {
        self.settled.store(true, Ordering::Relaxed);
        let acked = self.acks.ack(self.delivery_tag);
        self.bounded("acknowledging", acked).await
    }

    /// Sends a nack or a reject with the delivery's own acker, then tells
    /// the writer once the call is over, whatever its outcome (the frame is
    /// out, or the channel is gone). A call cut off by its bound leaves the
    /// delivery open to the writer: its frame may still be on its way, and
    /// no multiple acknowledgement may overtake it.
    async fn settle_alone(
        &self,
        what: &str,
        call: impl std::future::Future<Output = lapin::Result<bool>>,
    ) -> Result<(), Error> {
        self.settled.store(true, Ordering::Relaxed);
        let call = async {
            let result = call.await;
            self.acks.settled(self.delivery_tag);
            result
        };
        self.bounded(what, call).await
    }

    async fn dead_letter_now(&self, reason: String) -> Result<(), Error> {
        let Some(suffix) = self.inner.options.dead_suffix_in_use() else {
            tracing::warn!(
                queue = %self.queue,
                job_id = %self.envelope.job_id,
                reason = properties::cap_reason(&reason),
                "dead-letter queues are off: rejecting without requeue, so the broker's own \
                 dead-letter policy for the queue applies"
            );
            let reject = self.acker.reject(BasicRejectOptions { requeue: false });
            return self.settle_alone("rejecting", reject).await;
        };
        let dead = topology::dead_letter_queue_name(&self.queue, suffix);
        let info = DeadLetterInfo {
            reason: &reason,
            original_queue: &self.queue,
            attempts: self.envelope.attempt,
        };
        let properties = properties::with_dead_letter_headers(
            // A dead-letter queue has no priorities.
            properties::job_properties(&self.envelope, 0),
            &info,
        );
        let message_id = self.envelope.job_id.to_string();
        let config = self
            .inner
            .declared(&self.queue)
            .unwrap_or_else(|| Arc::new(QueueConfig::new(&*self.queue)));
        let out = Outgoing {
            queue: dead,
            body: self.around.rebuild(&self.envelope),
            message_id,
            properties,
        };
        self.inner.send_dead_letter(out, &config).await?;
        self.ack_now().await
    }
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
    fn rebuild(&self, envelope: &Envelope) -> Bytes {
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

    fn settle(self: Box<Self>, disposition: Disposition) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(async move {
            match disposition.plan(&self.envelope, &self.queue) {
                Plan::Ack => self.ack_now().await,
                Plan::Hold { next, delay, kind } => {
                    self.inner.hold(&next, delay, kind).await?;
                    self.ack_now().await
                }
                Plan::DeadLetter { reason } => self.dead_letter_now(reason).await,
                Plan::Requeue => {
                    let options = BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    };
                    self.settle_alone("requeueing", self.acker.nack(options))
                        .await
                }
            }
        })
    }
}

impl Drop for RabbitMqDelivery {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Relaxed) {
            requeue_later(&self.acker, &self.queue, self.delivery_tag, &self.acks);
        }
    }
}

/// Hands an unsettled delivery back to the broker after [`REQUEUE_DELAY`],
/// then tells the channel's writer. Does nothing for a settled one, or when
/// no runtime is left to do it (the broker then requeues it when the
/// channel closes).
pub(crate) fn requeue_later(acker: &Acker, queue: &Arc<str>, delivery_tag: u64, acks: &Acks) {
    if !acker.usable() {
        // Settled already (and reported by whoever did it), or its channel
        // is gone.
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let acker = acker.clone();
    let queue = Arc::clone(queue);
    let acks = acks.clone();
    runtime.spawn(async move {
        tokio::time::sleep(REQUEUE_DELAY).await;
        let requeue = BasicNackOptions {
            multiple: false,
            requeue: true,
        };
        let handed_back = acker.nack(requeue).await;
        acks.settled(delivery_tag);
        if let Ok(true) = handed_back {
            tracing::debug!(queue = %queue, delivery_tag, "handed an unsettled delivery back to the broker");
        }
    });
}

impl fmt::Debug for RabbitMqDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqDelivery")
            .field("queue", &self.queue)
            .field("delivery_tag", &self.delivery_tag)
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
