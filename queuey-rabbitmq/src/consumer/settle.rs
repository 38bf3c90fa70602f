//! Settling one delivery on its channel: acknowledging it through the
//! channel's writer, or with its own acker a nack or a reject, each within
//! the call bound; and handing back one that was left unsettled.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use lapin::{Acker, Channel};
use queuey_core::{BackendErrorKind, Error};

use super::acks::Acks;
use crate::bound;
use crate::error::{Failure, backend};
use crate::options::REQUEUE_DELAY;

/// Counter: settles refused because the delivery's channel was gone (it came
/// on a connection that has since died); the broker delivers those again.
pub(crate) const STALE_SETTLES: &str = "queuey_rabbitmq_stale_settles_total";

/// A `basic.nack` handing one delivery back to its queue.
const REQUEUE: BasicNackOptions = BasicNackOptions {
    multiple: false,
    requeue: true,
};

/// How one delivery is settled: its tag and acker, the writer of its
/// channel's acknowledgements, the queue it came from, and the bound on
/// each call.
pub(crate) struct Settler {
    acker: Acker,
    tag: u64,
    /// The writer of the channel's acknowledgements. It also keeps the
    /// channel open until the delivery is settled.
    acks: Acks,
    queue: Arc<str>,
    bound: Duration,
}

impl Settler {
    pub(crate) fn new(
        acker: Acker,
        tag: u64,
        acks: Acks,
        queue: Arc<str>,
        bound: Duration,
    ) -> Self {
        Settler {
            acker,
            tag,
            acks,
            queue,
            bound,
        }
    }

    /// The delivery's tag.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }

    /// The queue the delivery was consumed from.
    pub(crate) fn queue(&self) -> &Arc<str> {
        &self.queue
    }

    /// The channel the delivery came on.
    pub(crate) fn channel(&self) -> &Channel {
        self.acks.channel()
    }

    /// Acknowledges through the channel's writer, which may cover the
    /// delivery with a multiple acknowledgement (see [`Acks`]): handed to
    /// it, the acknowledgement is under way, and this returns at once.
    pub(crate) fn ack(&self) -> Result<(), Error> {
        let what = Settling {
            verb: "acknowledging",
            tag: self.tag,
            queue: &self.queue,
        };
        self.outcome(&what, self.acks.ack(self.tag))
    }

    /// Acknowledges with the delivery's own acker, past the writer.
    pub(crate) async fn ack_alone(&self) -> Result<(), Error> {
        let ack = self.acker.ack(BasicAckOptions::default());
        self.alone("acknowledging", ack).await
    }

    /// Hands the delivery back to the broker at once (`basic.nack` with
    /// requeue).
    pub(crate) async fn requeue(&self) -> Result<(), Error> {
        self.alone("requeueing", self.acker.nack(REQUEUE)).await
    }

    /// Rejects without requeue: the broker's own dead-letter policy for the
    /// queue, if any, takes the message. What a dead letter becomes when
    /// the backend declares no dead-letter queues.
    pub(crate) async fn reject(&self) -> Result<(), Error> {
        let reject = self.acker.reject(BasicRejectOptions { requeue: false });
        self.alone("rejecting", reject).await
    }

    /// Sends a nack, a reject or an acknowledgement with the delivery's own
    /// acker within the call bound (a call whose connection is silently
    /// gone fails instead of holding its caller), then tells the writer
    /// once the call is over, whatever its outcome. A call cut off by its
    /// bound leaves the delivery open to the writer: its frame may still be
    /// on its way, and no multiple acknowledgement may overtake it.
    async fn alone(
        &self,
        verb: &str,
        call: impl Future<Output = lapin::Result<bool>>,
    ) -> Result<(), Error> {
        let what = Settling {
            verb,
            tag: self.tag,
            queue: &self.queue,
        };
        let call = async {
            let result = call.await;
            self.acks.settled(self.tag);
            Ok(result)
        };
        let result = bound::within(self.bound, &what, call).await?;
        self.outcome(&what, result)
    }

    /// Turns the result of a settle call into queuey's. The error text is
    /// only built for an error: a settle that worked allocates nothing here.
    fn outcome(&self, what: &Settling<'_>, result: lapin::Result<bool>) -> Result<(), Error> {
        match result {
            Ok(true) => Ok(()),
            Ok(false) => {
                metrics::counter!(STALE_SETTLES, "queue" => self.queue.to_string()).increment(1);
                let text = format!(
                    "{what}: not settled, because its channel is closed (the connection it came \
                     on is gone) or it was settled already; the broker will deliver it again"
                );
                Err(backend(BackendErrorKind::NotSettled, text))
            }
            Err(e) => {
                Err(Failure::of(&e, self.channel().status().connected())
                    .into_error(&what.to_string()))
            }
        }
    }

    /// Hands an unsettled delivery back to the broker after
    /// [`REQUEUE_DELAY`], then tells the channel's writer. Does nothing for
    /// a settled one, or when no runtime is left to do it (the broker then
    /// requeues it when the channel closes).
    pub(crate) fn requeue_later(&self) {
        if !self.acker.usable() {
            // Settled already (and reported by whoever did it), or its
            // channel is gone.
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let acker = self.acker.clone();
        let queue = Arc::clone(&self.queue);
        let acks = self.acks.clone();
        let delivery_tag = self.tag;
        runtime.spawn(async move {
            tokio::time::sleep(REQUEUE_DELAY).await;
            let handed_back = acker.nack(REQUEUE).await;
            acks.settled(delivery_tag);
            if let Ok(true) = handed_back {
                tracing::debug!(queue = %queue, delivery_tag, "handed an unsettled delivery back to the broker");
            }
        });
    }
}

/// A settle call, as errors name it.
struct Settling<'a> {
    verb: &'a str,
    tag: u64,
    queue: &'a str,
}

impl fmt::Display for Settling<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} delivery {} from `{}`",
            self.verb, self.tag, self.queue
        )
    }
}
