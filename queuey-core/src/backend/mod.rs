//! The contract between queuey and a message broker.
//!
//! A [`Backend`] declares queues, publishes envelopes (now, after a delay, or
//! as a deferral) and consumes queues as streams of [`Delivery`]s. Every
//! method that publishes returns `Ok` only once the broker holds the message
//! durably (for RabbitMQ: a publisher confirm that is a bare ack). A delivery
//! is settled exactly once, by one of its consuming methods; publishing
//! always comes before acknowledging, so a crash in between duplicates a job
//! and never loses one.
//!
//! Moving jobs is all [`Backend`] asks for. What a backend may carry
//! besides is a trait of its own, and each feature that needs one says so
//! in its bounds: [`Replies`] for callers that wait for a job's result,
//! [`ControlChannel`] for cancelling jobs and pausing queues,
//! [`Heartbeats`] for the list of running workers,
//! [`Leadership`](crate::periodic::Leadership) for periodic jobs. [`Backend::capabilities`] lists the ones a backend has,
//! for the worker, which uses each one it finds.
//!
//! The traits are object safe: `Arc<dyn Backend>` works, and so does any
//! `Arc<B>`. Backends can live outside this crate.

mod capabilities;
mod control_channel;
pub(crate) mod disposition;
mod granularity;
mod heartbeats;
pub(crate) mod hold;
mod reply;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;

pub use crate::wait::fits_a_hold;
pub use capabilities::Capabilities;
pub use control_channel::ControlChannel;
pub use disposition::{HoldKind, Plan, too_long_reason};
pub use granularity::{Granularity, effective_granularity_ms, round_up_ms};
pub use heartbeats::Heartbeats;
pub use hold::hold_delay_ms;
pub use reply::{PendingReply, Replies, Reply, ReplyLost, ReplyTo};

use crate::{Disposition, Envelope, Error, QueueConfig};

/// The dead-letter reason of a message whose body is not an [`Envelope`].
pub const MALFORMED_ENVELOPE_REASON: &str = "malformed envelope";

/// A stream of deliveries from one queue.
///
/// It yields `Err` when the consumer failed (for example because the
/// connection dropped), after which it ends. It ends with `None` when the
/// consumer was cancelled or the backend closed.
pub type DeliveryStream = BoxStream<'static, Result<Box<dyn Delivery>, Error>>;

/// How a backend's link to its broker stands, as far as the backend knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Connected: calls go to the broker.
    Connected,
    /// The connection was lost and the backend is connecting again; calls
    /// wait for it (up to their bound) or fail with a transient error.
    Reconnecting,
    /// The backend gave up on something that cannot heal (credentials
    /// refused, a virtual host that is gone, a reconnection deadline
    /// passed); every call fails.
    Failed,
    /// The backend was closed.
    Closed,
}

impl ConnectionState {
    /// A short lowercase name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Connected => "connected",
            ConnectionState::Reconnecting => "reconnecting",
            ConnectionState::Failed => "failed",
            ConnectionState::Closed => "closed",
        }
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message broker as queuey uses it.
pub trait Backend: fmt::Debug + Send + Sync + 'static {
    /// Creates each queue (and whatever companions the backend needs, such as
    /// a dead-letter queue) if it does not exist, and remembers its
    /// configuration. Idempotent. Validates every configuration first and
    /// creates nothing if one is invalid.
    ///
    /// A [sharded](QueueConfig::shards) queue is declared as every broker
    /// queue of [`QueueConfig::physical`]: its lane and its shards.
    ///
    /// Delayed publishes and deferrals are only accepted for queues declared
    /// through this backend.
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes the envelope to its queue (`envelope.queue`) with its
    /// priority. `Ok` means the broker holds it durably.
    ///
    /// The queue need not have been declared through this backend, but it
    /// must exist: publishing to a missing queue is an error, never a silent
    /// drop.
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes the envelope so that it reaches its queue after `delay`,
    /// rounded up to the backend's retry granularity, never earlier. Used for
    /// retries and delayed enqueues. A zero delay publishes at once.
    ///
    /// Fails with [`Error::UnknownQueue`] for a queue not declared through
    /// this backend and [`Error::DelayTooLong`] past
    /// [`MAX_DEFERRAL_MS`](crate::MAX_DEFERRAL_MS), before anything is published.
    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes the envelope as a deferral: it reaches its queue after
    /// `delay`, rounded up to the backend's deferral granularity, with the
    /// queue's top priority, so it is served ahead of the backlog.
    ///
    /// Fails like [`publish_after`](Backend::publish_after).
    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes many envelopes, each to its own queue, and reports each
    /// outcome in order. Backends may publish them concurrently.
    fn publish_batch<'a>(
        &'a self,
        envelopes: &'a [Envelope],
    ) -> BoxFuture<'a, Vec<Result<(), Error>>> {
        Box::pin(futures::future::join_all(
            envelopes.iter().map(|e| self.publish(e)),
        ))
    }

    /// Starts consuming a queue. At most `queue.settings().prefetch()` deliveries
    /// of this consumer are unsettled at any time.
    ///
    /// One broker queue: the one `queue` names. For a sharded queue that is
    /// its lane; the worker consumes each of [`QueueConfig::physical`].
    ///
    /// Bodies that are not envelopes never reach the stream: the backend
    /// copies them to the dead-letter store with the reason
    /// `malformed envelope` and acknowledges them.
    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>>;

    /// How the backend's connection stands now. A backend with no
    /// connection to lose (the in-memory one) is always
    /// [`Connected`](ConnectionState::Connected), which is the default.
    fn connection_state(&self) -> ConnectionState {
        ConnectionState::Connected
    }

    /// Resolves with the [connection state](Backend::connection_state)
    /// once it is no longer `seen` (at once if it is not now). A worker
    /// learns of a lost connection, and of its return, from it.
    ///
    /// A backend that can tell when its state changes overrides this; the
    /// default looks at `connection_state` every 100 ms.
    fn connection_changed(&self, seen: ConnectionState) -> BoxFuture<'_, ConnectionState> {
        Box::pin(async move {
            loop {
                let now = self.connection_state();
                if now != seen {
                    return now;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    /// How long the broker lets a delivery of `queue` go unacknowledged
    /// before it takes it back and delivers it again, or `None` when it
    /// never does (the default, and the in-memory backend's answer).
    ///
    /// A worker refuses to build when its job timeout, plus a margin to
    /// settle the job, reaches this bound: past it the broker would deliver
    /// a job again while its first run still runs. A backend that cannot
    /// know the broker's setting answers from its own configuration.
    fn consumer_timeout(&self, queue: &QueueConfig) -> Option<Duration> {
        let _ = queue;
        None
    }

    /// What this backend carries besides moving jobs: replies to waiting
    /// callers, the fleet's control commands, workers' heartbeats. A
    /// backend lists each capability trait it implements (see
    /// [`Capabilities`]); a worker uses what is listed and tells apart what
    /// is not, so a backend that carries none of them answers
    /// [`Capabilities::none`].
    fn capabilities(&self) -> Capabilities<'_>;

    /// Resolves once the settles this backend took on and finishes on its
    /// own are out: acknowledgements a [`Delivery::settle`] handed to a
    /// writer and returned before they were sent, deliveries of a dropped
    /// stream being handed back. A worker waits for it once its jobs have
    /// ended, so that `run` returns with every job it settled sent to the
    /// broker. Bounded by the backend's own call bound; never an error.
    ///
    /// The default resolves at once: the backend finishes every settle
    /// before `settle` returns.
    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(futures::future::ready(()))
    }
}

/// One delivered job, to be settled exactly once.
///
/// A backend implements three methods: the envelope, the redelivery flag,
/// and [`settle`](Delivery::settle), which carries out a [`Disposition`].
/// The backend builds whatever it publishes itself, from its own envelope
/// ([`Disposition::plan`]), so no caller can hand it the wrong one.
///
/// When settling fails, nothing was acknowledged: the message stays with the
/// broker, which delivers it again (with [`redelivered`](Delivery::redelivered)
/// set). A delivery dropped without being settled is likewise never lost.
pub trait Delivery: fmt::Debug + Send + Sync {
    /// The decoded envelope.
    fn envelope(&self) -> &Envelope;

    /// Whether the broker delivered this message before.
    fn redelivered(&self) -> bool;

    /// Carries out `disposition`: publishes first (a hold, a dead letter)
    /// and waits for the broker to hold the message, then acknowledges; or
    /// acknowledges, or hands the message back. A retry or deferral longer
    /// than [`LONGEST_WAIT`](crate::LONGEST_WAIT) is dead-lettered with a reason, never shortened.
    fn settle(self: Box<Self>, disposition: Disposition) -> BoxFuture<'static, Result<(), Error>>;

    /// The envelope, to change before it is settled, or `None` when the
    /// backend does not allow it (the default).
    ///
    /// A worker records the error of an attempt it retries here
    /// ([`Envelope::record_error`]), so the next attempt, and in the end
    /// its dead letter, carries it. Whatever a backend publishes for a
    /// [`Disposition::Retry`] or [`Disposition::Defer`] is built from this
    /// envelope; a dead letter keeps the body as it was delivered.
    fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        None
    }

    /// Acknowledges the job: [`settle`](Delivery::settle) with
    /// [`Disposition::Ack`].
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), Error>> {
        self.settle(Disposition::Ack)
    }
}

impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>> {
        (**self).declare(queues)
    }

    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>> {
        (**self).publish(envelope)
    }

    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        (**self).publish_after(envelope, delay)
    }

    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        (**self).defer(envelope, delay)
    }

    fn publish_batch<'a>(
        &'a self,
        envelopes: &'a [Envelope],
    ) -> BoxFuture<'a, Vec<Result<(), Error>>> {
        (**self).publish_batch(envelopes)
    }

    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>> {
        (**self).consume(queue)
    }

    fn connection_state(&self) -> ConnectionState {
        (**self).connection_state()
    }

    fn connection_changed(&self, seen: ConnectionState) -> BoxFuture<'_, ConnectionState> {
        (**self).connection_changed(seen)
    }

    fn consumer_timeout(&self, queue: &QueueConfig) -> Option<Duration> {
        (**self).consumer_timeout(queue)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        (**self).capabilities()
    }

    fn flush(&self) -> BoxFuture<'_, ()> {
        (**self).flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Both traits must stay object safe.
    #[allow(dead_code)]
    fn object_safe(_: &dyn Backend, _: Box<dyn Delivery>) {}

    #[allow(dead_code)]
    fn arc_dyn_is_a_backend(b: Arc<dyn Backend>) -> impl Backend {
        b
    }
}
