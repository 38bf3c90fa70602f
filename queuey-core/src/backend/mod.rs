//! The contract between queuey and a message broker.
//!
//! A [`Backend`] declares queues, publishes envelopes (now, after a delay, or
//! as a deferral) and consumes queues as streams of [`Delivery`]s. A publish
//! returns `Ok` only once the broker holds the message durably (RabbitMQ: a
//! bare-ack publisher confirm). A delivery is settled exactly once; publishing
//! comes before acknowledging, so a crash in between duplicates a job and
//! never loses one.
//!
//! Anything beyond moving jobs is a trait of its own, named in the bounds of
//! the feature that needs it: [`Replies`] (waiting for a job's result),
//! [`ControlChannel`] (cancels, pauses), [`Heartbeats`] (running workers),
//! [`Leadership`](crate::periodic::Leadership) (periodic jobs).
//! [`Backend::capabilities`] lists the ones a backend has for the worker.
//!
//! The traits are object safe (`Arc<dyn Backend>` and any `Arc<B>` work);
//! backends can live outside this crate.

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

/// A stream of deliveries from one queue. It yields `Err` when the consumer
/// failed (say, the connection dropped) and then ends; it ends with `None`
/// when the consumer was cancelled or the backend closed.
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
    /// Creates each queue (and companions such as its dead-letter queue) if
    /// missing, and remembers its configuration. Idempotent; validates every
    /// configuration first and creates nothing if one is invalid. A
    /// [sharded](QueueConfig::shards) queue is declared as every queue of
    /// [`QueueConfig::physical`]. Delayed publishes and deferrals are only
    /// accepted for queues declared through this backend.
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes the envelope to `envelope.queue` with its priority. `Ok`
    /// means the broker holds it durably. The queue must exist (declared here
    /// or not): a missing queue is an error, never a silent drop.
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes the envelope so that it reaches its queue after `delay`
    /// rounded up to the retry granularity, never earlier (retries, delayed
    /// enqueues); a zero delay publishes at once. Fails, publishing nothing,
    /// with [`Error::UnknownQueue`] for a queue not declared here and
    /// [`Error::DelayTooLong`] past [`MAX_DEFERRAL_MS`](crate::MAX_DEFERRAL_MS).
    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// Publishes the envelope as a deferral: after `delay` rounded up to the
    /// deferral granularity, at the queue's top priority (ahead of the
    /// backlog). Fails like [`publish_after`](Backend::publish_after).
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

    /// Starts consuming the one broker queue `queue` names (a sharded
    /// queue's lane; the worker consumes each of [`QueueConfig::physical`]),
    /// with at most `queue.settings().prefetch()` deliveries unsettled. Bodies
    /// that are not envelopes never reach the stream: they are dead-lettered
    /// with the reason `malformed envelope` and acknowledged.
    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>>;

    /// How the backend's connection stands now; by default (a backend with
    /// no connection to lose) always [`Connected`](ConnectionState::Connected).
    fn connection_state(&self) -> ConnectionState {
        ConnectionState::Connected
    }

    /// Resolves with the [connection state](Backend::connection_state) once
    /// it is no longer `seen`; a worker learns of a lost connection, and its
    /// return, from it. The default looks at `connection_state` every 100 ms.
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
    /// before it delivers it again, or `None` (the default) when it never
    /// does. A worker whose job timeout plus a settle margin reaches it
    /// refuses to build: the broker would redeliver a job that still runs.
    fn consumer_timeout(&self, queue: &QueueConfig) -> Option<Duration> {
        let _ = queue;
        None
    }

    /// The capability traits this backend implements (replies, control
    /// commands, heartbeats; see [`Capabilities`]), for the worker to use;
    /// [`Capabilities::none`] when it carries none.
    fn capabilities(&self) -> Capabilities<'_>;

    /// Resolves once the settles this backend finishes on its own are out
    /// (acknowledgements handed to a writer, deliveries of a dropped stream
    /// handed back); a worker waits for it before `run` returns. Bounded by
    /// the backend's call bound, never an error. The default resolves at
    /// once, for a backend whose `settle` finishes before it returns.
    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(futures::future::ready(()))
    }
}

/// One delivered job, to be settled exactly once.
///
/// [`settle`](Delivery::settle) carries out a [`Disposition`], building what
/// it publishes from the delivery's own envelope ([`Disposition::plan`]).
/// When settling fails, or a delivery is dropped unsettled, nothing was
/// acknowledged: the broker delivers the message again, `redelivered` set.
pub trait Delivery: fmt::Debug + Send + Sync {
    /// The decoded envelope.
    fn envelope(&self) -> &Envelope;

    /// Whether the broker delivered this message before.
    fn redelivered(&self) -> bool;

    /// Carries out `disposition`: publishes first (a hold, a dead letter),
    /// waits for the broker to hold it, then acknowledges; or acknowledges,
    /// or hands the message back. A retry or deferral longer than
    /// [`LONGEST_WAIT`](crate::LONGEST_WAIT) is dead-lettered, never shortened.
    fn settle(self: Box<Self>, disposition: Disposition) -> BoxFuture<'static, Result<(), Error>>;

    /// The envelope, to change before it is settled, or `None` (the
    /// default) when the backend does not allow it. A worker records a
    /// retried attempt's error here ([`Envelope::record_error`]); a
    /// [`Disposition::Retry`] or [`Disposition::Defer`] publishes this
    /// envelope, a dead letter the body as delivered.
    fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        None
    }

    /// Acknowledges the job: [`settle`](Delivery::settle) with
    /// [`Disposition::Ack`].
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), Error>> {
        self.settle(Disposition::Ack)
    }
}

crate::forward_to_shared! {
    impl<B: Backend + ?Sized> Backend for Arc<B> {
        fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>>;
        fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>>;
        fn publish_after<'a>(&'a self, envelope: &'a Envelope, delay: Duration)
            -> BoxFuture<'a, Result<(), Error>>;
        fn defer<'a>(&'a self, envelope: &'a Envelope, delay: Duration)
            -> BoxFuture<'a, Result<(), Error>>;
        fn publish_batch<'a>(&'a self, envelopes: &'a [Envelope])
            -> BoxFuture<'a, Vec<Result<(), Error>>>;
        fn consume<'a>(&'a self, queue: &'a QueueConfig)
            -> BoxFuture<'a, Result<DeliveryStream, Error>>;
        fn connection_state(&self) -> ConnectionState;
        fn connection_changed(&self, seen: ConnectionState) -> BoxFuture<'_, ConnectionState>;
        fn consumer_timeout(&self, queue: &QueueConfig) -> Option<Duration>;
        fn capabilities(&self) -> Capabilities<'_>;
        fn flush(&self) -> BoxFuture<'_, ()>;
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
