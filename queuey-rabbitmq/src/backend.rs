//! The backend: one connection, the channels on it, and the
//! [`Backend`] implementation.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use queuey_core::{
    Backend, BackendError, BackendErrorKind, ConnectionState, DeliveryStream, Envelope, Error,
    QueueConfig,
};
use tokio::time::Instant;

use crate::declare::{self, HoldDeclarer};
use crate::hold::Leases;
use crate::link::{Current, Link};
use crate::publisher::{Outgoing, Publisher};
use crate::topology::HoldQueues;
use crate::{RabbitMqOptions, consumer, properties, topology};
use queuey_core::backend::HoldKind;

/// The RabbitMQ backend: one AMQP connection shared by every producer and
/// worker of a process. See the [crate documentation](crate) for the channel
/// model and the topology.
///
/// Cheap to clone; clones share the connection. Its `Debug` output shows the
/// broker URI with the password masked.
#[derive(Clone)]
pub struct RabbitMqBackend {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The connection of the moment, replaced when it dies.
    pub(crate) link: Arc<Link>,
    pub(crate) options: RabbitMqOptions,
    pub(crate) publisher: Publisher,
    pub(crate) holds: HoldDeclarer,
    /// The hold-queue declarations later holds may rely on.
    pub(crate) leases: Leases,
}

impl RabbitMqBackend {
    /// Connects with the default options.
    ///
    /// `addresses` is one AMQP URI or several (`&str`, `String`, a slice, an
    /// array or a `Vec` of them): the nodes of a cluster, tried in turn. The
    /// first that answers is used; when its connection dies, the backend
    /// connects again to any of them (see [`RabbitMqOptions::reconnect_delay`]).
    ///
    /// Must be called inside a tokio runtime, which must outlive the backend.
    pub async fn connect(addresses: impl Addresses) -> Result<Self, Error> {
        Self::with_options(addresses, RabbitMqOptions::default()).await
    }

    /// Connects with the given options, which are checked first.
    ///
    /// The first connection is not retried: an address that does not
    /// answer, or credentials the broker refuses, fail here. Errors never
    /// contain a password.
    pub async fn with_options(
        addresses: impl Addresses,
        options: RabbitMqOptions,
    ) -> Result<Self, Error> {
        options.validate()?;
        let addresses = addresses.into_addresses();
        let link = Link::connect(&addresses, options.clone()).await?;
        let publisher = Publisher::new(
            Arc::clone(&link),
            options.settings().publish_concurrency(),
            options.publish_window,
        );
        Ok(RabbitMqBackend {
            inner: Arc::new(Inner {
                link,
                publisher,
                holds: HoldDeclarer::new(declare::HOLD_DECLARATION_CHANNELS),
                leases: Leases::default(),
                options,
            }),
        })
    }

    /// The options the backend was built with.
    pub fn options(&self) -> &RabbitMqOptions {
        &self.inner.options
    }

    /// Whether the connection is up and the backend not closed.
    pub fn is_connected(&self) -> bool {
        self.inner.link.state() == ConnectionState::Connected
    }

    /// Closes the connection, within the call timeout whatever state its
    /// channels are in. Consumer streams end, unsettled deliveries go back
    /// to their queues, and every later call fails with
    /// [`Error::ShutDown`]. Closing twice is a no-op.
    pub async fn close(&self) -> Result<(), Error> {
        self.inner.publisher.close();
        self.inner.holds.close();
        self.inner.link.close().await
    }
}

/// One broker address or several, for [`RabbitMqBackend::connect`].
pub trait Addresses {
    /// The addresses, in the order they are tried.
    fn into_addresses(self) -> Vec<String>;
}

impl Addresses for &str {
    fn into_addresses(self) -> Vec<String> {
        vec![self.to_owned()]
    }
}

impl Addresses for String {
    fn into_addresses(self) -> Vec<String> {
        vec![self]
    }
}

impl Addresses for &String {
    fn into_addresses(self) -> Vec<String> {
        vec![self.clone()]
    }
}

impl<S: AsRef<str>> Addresses for &[S] {
    fn into_addresses(self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_owned()).collect()
    }
}

impl<S: AsRef<str>, const N: usize> Addresses for [S; N] {
    fn into_addresses(self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_owned()).collect()
    }
}

impl<S: AsRef<str>> Addresses for Vec<S> {
    fn into_addresses(self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_owned()).collect()
    }
}

impl Inner {
    pub(crate) fn is_closed(&self) -> bool {
        self.link.is_closed()
    }

    pub(crate) fn declared(&self, queue: &str) -> Option<Arc<QueueConfig>> {
        self.link.declared(queue)
    }

    /// The connection to use, waiting for a reconnection up to the publish
    /// bound; `what` is formatted only for an error.
    pub(crate) async fn publishing_connection(
        &self,
        what: impl FnOnce() -> String,
    ) -> Result<Current, Error> {
        if self.is_closed() {
            return Err(Error::ShutDown);
        }
        if let Some(current) = self.link.current() {
            return Ok(current);
        }
        let deadline = Instant::now() + self.options.publish_timeout;
        self.link.connection_until(deadline, &what()).await
    }

    /// Reports a failure seen on the connection of `generation`.
    pub(crate) fn saw(&self, generation: u64, error: &Error) {
        if error.is_connection_lost() {
            self.link.suspect(generation);
        }
    }

    /// Publishes a body whose size is settled: checked by [`Inner::prepare`],
    /// or a body the broker delivered to us being copied unchanged to a
    /// dead-letter queue (the broker accepted its size once already, so
    /// queuey's own limit does not apply).
    ///
    /// A publish whose channel or connection failed is published again
    /// until the publish bound ([`RabbitMqOptions::publish_timeout`]) has
    /// passed: a duplicate at worst, never a loss.
    pub(crate) async fn send(&self, out: Outgoing) -> Result<(), Error> {
        let deadline = Instant::now() + self.options.publish_timeout;
        self.retrying(
            deadline,
            || format!("publishing to `{}`", out.queue),
            || self.publisher.publish(out.clone(), deadline),
        )
        .await
    }

    /// Publishes a dead letter into `out.queue`, the dead-letter queue of
    /// `config`'s queue. When that queue is gone (the publish comes back
    /// `NO_ROUTE`: an operator deleted it), declares it once and publishes
    /// again; a second refusal is returned.
    pub(crate) async fn send_dead_letter(
        &self,
        out: Outgoing,
        config: &QueueConfig,
    ) -> Result<(), Error> {
        match self.send(out.clone()).await {
            Err(Error::Backend(e)) if e.kind() == BackendErrorKind::Unroutable => {
                tracing::warn!(dead_letter_queue = %out.queue, "the dead-letter queue is gone; declaring it again");
                let what = format!("declaring dead-letter queue `{}` again", out.queue);
                let current = self.link.connection(&what).await?;
                let bound = self.options.call_timeout;
                let declaring =
                    declare::declare_dead_letter_queue(&current.connection, &out.queue, config);
                let declared = match tokio::time::timeout(bound, declaring).await {
                    Ok(result) => result,
                    Err(_) => Err(timed_out(&what, bound)),
                };
                if let Err(error) = &declared {
                    self.saw(current.generation, error);
                }
                declared?;
                self.send(out).await
            }
            other => other,
        }
    }

    /// Runs `attempt` again after each transient failure (a lost
    /// connection, a publish whose outcome is unknown, a wait that timed
    /// out) until it succeeds, fails for good, or `deadline` passes; then
    /// the last error is returned. `what` is formatted only for an error.
    pub(crate) async fn retrying<F, Fut>(
        &self,
        deadline: Instant,
        what: impl Fn() -> String,
        mut attempt: F,
    ) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), Error>>,
    {
        let mut pause = Duration::ZERO;
        // Whether an earlier try was sent and never confirmed: then the
        // broker may hold the message whatever later tries say, and a final
        // failure must say so rather than read as "never published".
        let mut uncertain = false;
        loop {
            let result = match tokio::time::timeout_at(deadline, attempt()).await {
                Ok(result) => result,
                Err(_) if uncertain => {
                    return Err(uncertain_after(&what(), self.options.publish_timeout));
                }
                Err(_) => return Err(self.publish_timed_out(&what())),
            };
            if let Err(Error::Backend(e)) = &result
                && e.kind() == BackendErrorKind::Uncertain
            {
                uncertain = true;
            }
            match result {
                Err(error)
                    if error.is_transient()
                        && !self.is_closed()
                        && Instant::now() + pause < deadline =>
                {
                    tracing::debug!(%error, "{}: trying again", what());
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).clamp(RETRY_PAUSE_MIN, RETRY_PAUSE_MAX);
                }
                Err(error) if uncertain && error.is_transient() => {
                    return Err(uncertain_after(&what(), self.options.publish_timeout));
                }
                other => return other,
            }
        }
    }

    /// Publishes `envelope` to its own queue.
    async fn publish_envelope(&self, envelope: &Envelope) -> Result<(), Error> {
        let prepared = self.prepare(envelope)?;
        self.send(prepared.outgoing(&envelope.queue)).await
    }

    /// Encodes an envelope and checks its size: everything that can fail
    /// before the broker is involved.
    pub(crate) fn prepare(&self, envelope: &Envelope) -> Result<Prepared, Error> {
        let body = envelope.encode().map_err(|source| Error::Encode {
            queue: envelope.queue.clone(),
            source,
        })?;
        self.check_size(&envelope.queue, body.len())?;
        // A queue declared without priorities would ignore one.
        let priority = match self.declared(&envelope.queue) {
            Some(config) if config.top_priority() == 0 => 0,
            _ => envelope.priority,
        };
        let properties = properties::job_properties(envelope, priority);
        // The message id job_properties just wrote: the job id, formatted once.
        let message_id = properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default();
        Ok(Prepared {
            body: Bytes::from(body),
            message_id,
            properties,
        })
    }

    fn check_size(&self, queue: &str, size: usize) -> Result<(), Error> {
        let limit = self.options.settings().max_message_size();
        if size > limit {
            return Err(Error::MessageTooLarge {
                queue: queue.to_owned(),
                size,
                limit,
            });
        }
        Ok(())
    }
}

/// The first and the longest pause between two tries of a publish whose
/// channel or connection failed (the first retry goes at once).
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(25);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// An encoded envelope, checked and ready to publish.
pub(crate) struct Prepared {
    body: Bytes,
    message_id: String,
    properties: lapin::BasicProperties,
}

impl Prepared {
    pub(crate) fn outgoing(self, queue: &str) -> Outgoing {
        Outgoing {
            queue: queue.to_owned(),
            body: self.body,
            message_id: self.message_id,
            properties: self.properties,
        }
    }
}

impl Backend for RabbitMqBackend {
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let inner = &self.inner;
            for config in queues {
                config.validate()?;
                topology::check_room(
                    config.name(),
                    inner.options.settings().deferred_suffix(),
                    inner.options.dead_suffix_in_use(),
                    inner.options.hold_queues,
                )?;
                if config.is_quorum() && inner.options.hold_queues == HoldQueues::Classic {
                    return Err(Error::invalid_config(format!(
                        "queue `{}` is a quorum queue, but this backend uses classic hold queues, \
                         which lose the jobs they release into a quorum queue whenever the \
                         broker restarts; use `RabbitMqOptions::hold_queues(HoldQueues::Quorum)` \
                         (the default) or a classic work queue",
                        config.name()
                    )));
                }
            }
            if inner.is_closed() {
                return Err(Error::ShutDown);
            }
            let current = inner.link.connection("declaring queues").await?;
            let declaring =
                declare::declare_queues(&current.connection, &inner.options, queues, |config| {
                    inner.link.remember(config)
                });
            let result = match tokio::time::timeout(inner.options.call_timeout, declaring).await {
                Ok(result) => result,
                Err(_) => Err(timed_out("declaring queues", inner.options.call_timeout)),
            };
            if let Err(error) = &result {
                inner.saw(current.generation, error);
            }
            result
        })
    }

    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.inner.publish_envelope(envelope))
    }

    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.inner.hold(envelope, delay, HoldKind::Retry))
    }

    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.inner.hold(envelope, delay, HoldKind::Deferral))
    }

    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>> {
        Box::pin(consumer::consume(Arc::clone(&self.inner), queue))
    }

    fn connection_state(&self) -> ConnectionState {
        self.inner.link.state()
    }
}

impl Inner {
    /// The error of a publish that ran past its bound: saying so when the
    /// broker is unreachable (the backend is still reconnecting) tells an
    /// operator where to look.
    fn publish_timed_out(&self, what: &str) -> Error {
        let bound = self.options.publish_timeout;
        if self.link.current().is_some() {
            return timed_out(what, bound);
        }
        Error::Backend(BackendError::new(
            BackendErrorKind::TimedOut,
            format!(
                "{what}: RabbitMQ is unreachable and the backend is still reconnecting; \
                 gave up after {bound:?}"
            ),
        ))
    }
}

/// The error of a publish that was sent at least once without a
/// confirmation, then could not be confirmed within its bound.
fn uncertain_after(what: &str, bound: Duration) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::Uncertain,
        format!(
            "{what}: the connection was lost before RabbitMQ confirmed the message, and it \
             could not be confirmed again within {bound:?}; the broker may or may not hold it, \
             so publishing it again (same job id) is the safe answer"
        ),
    ))
}

/// The error of a broker call that ran past its bound.
pub(crate) fn timed_out(what: &str, bound: Duration) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::TimedOut,
        format!("{what}: no answer from RabbitMQ within {bound:?}"),
    ))
}

impl fmt::Debug for RabbitMqBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let declared = self.inner.link.declared_count();
        f.debug_struct("RabbitMqBackend")
            .field("uri", &self.inner.link.redacted_uri())
            .field("connected", &self.is_connected())
            .field("declared_queues", &declared)
            .field("options", &self.inner.options)
            .finish()
    }
}
