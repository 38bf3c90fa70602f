//! The backend: one connection, the channels on it, and the
//! [`Backend`] implementation.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use lapin::types::{LongString, ShortString};
use lapin::{Connection, ConnectionProperties, ErrorKind, Event};
use queuey_core::{
    Backend, BackendError, BackendErrorKind, DeliveryStream, Envelope, Error, QueueConfig,
};
use tokio::task::JoinHandle;

use crate::declare::{self, HoldDeclarer};
use crate::error::{Failure, connection_lost};
use crate::publisher::{Outgoing, Publisher};
use crate::{RabbitMqOptions, consumer, properties, topology, uri};

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

/// Which granularity and priority a hold uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldKind {
    /// A retry or delayed enqueue: retry granularity, the envelope's priority.
    Retry,
    /// A deferral: deferral granularity, the queue's top priority.
    Deferral,
}

pub(crate) struct Inner {
    pub(crate) connection: Connection,
    pub(crate) options: RabbitMqOptions,
    publisher: Publisher,
    holds: HoldDeclarer,
    /// Queues declared through this backend, with their configurations.
    declared: RwLock<HashMap<String, Arc<QueueConfig>>>,
    redacted_uri: String,
    closed: AtomicBool,
    events: Option<JoinHandle<()>>,
}

impl RabbitMqBackend {
    /// Connects with the default options.
    ///
    /// Must be called inside a tokio runtime, which must outlive the backend.
    pub async fn connect(uri: &str) -> Result<Self, Error> {
        Self::with_options(uri, RabbitMqOptions::default()).await
    }

    /// Connects with the given options, which are checked first.
    ///
    /// Errors never contain the URI's password.
    pub async fn with_options(uri: &str, options: RabbitMqOptions) -> Result<Self, Error> {
        options.validate()?;
        let redacted_uri = uri::redact(uri);
        tracing::debug!(uri = %redacted_uri, "connecting to RabbitMQ");
        let connection = Connection::connect(uri, connection_properties(&options))
            .await
            .map_err(|e| {
                let kind = match e.kind() {
                    ErrorKind::ProtocolError(_) => BackendErrorKind::Refused,
                    _ => BackendErrorKind::Other,
                };
                let text = uri::scrub(&e.to_string(), uri);
                Error::Backend(BackendError::new(
                    kind,
                    format!("connecting to RabbitMQ at `{redacted_uri}`: {text}"),
                ))
            })?;
        let events = spawn_event_logger(&connection, &redacted_uri);
        Ok(RabbitMqBackend {
            inner: Arc::new(Inner {
                connection,
                publisher: Publisher::new(options.get_publish_concurrency()),
                holds: HoldDeclarer::new(options.get_publish_concurrency()),
                options,
                declared: RwLock::new(HashMap::new()),
                redacted_uri,
                closed: AtomicBool::new(false),
                events,
            }),
        })
    }

    /// The options the backend was built with.
    pub fn options(&self) -> &RabbitMqOptions {
        &self.inner.options
    }

    /// Whether the connection is up and the backend not closed.
    pub fn is_connected(&self) -> bool {
        !self.inner.closed.load(Ordering::Acquire) && self.inner.connection.status().connected()
    }

    /// Closes the connection. Consumer streams end, unsettled deliveries go
    /// back to their queues, and every later call fails with
    /// [`Error::ShutDown`]. Closing twice is a no-op.
    pub async fn close(&self) -> Result<(), Error> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.publisher.close();
        self.inner.holds.close();
        if !self.inner.connection.status().connected() {
            return Ok(());
        }
        match self
            .inner
            .connection
            .close(200, ShortString::default())
            .await
        {
            Ok(()) => Ok(()),
            // Closing the connection closes its channels; one that was
            // closing already (a consumer's, just dropped) makes lapin report
            // an error although the connection goes away all the same.
            Err(e) if !self.inner.connection.status().connected() => {
                tracing::debug!(error = %e, "closing the connection raced a channel closing; it is closed");
                Ok(())
            }
            Err(e) => Err(Failure::of(&e, false).into_error("closing the connection")),
        }
    }
}

fn connection_properties(options: &RabbitMqOptions) -> ConnectionProperties {
    let mut props = ConnectionProperties::default();
    if let Some(locale) = options.get_locale() {
        props = props.with_locale(properties::short(locale));
    }
    for (key, value) in options.get_client_properties() {
        props =
            props.with_client_property(properties::short(key), LongString::from(value.as_str()));
    }
    if let Some(name) = options.get_connection_name() {
        props = props.with_connection_name(LongString::from(name));
    }
    props
}

/// Logs connection events; lapin queues them only while someone listens.
fn spawn_event_logger(connection: &Connection, uri: &str) -> Option<JoinHandle<()>> {
    let mut events = connection.events_listener();
    let uri = uri.to_owned();
    let handle = tokio::runtime::Handle::try_current().ok()?;
    Some(handle.spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Event::Error(error) => tracing::warn!(%uri, %error, "RabbitMQ connection error"),
                Event::ConnectionBlocked(reason) => {
                    tracing::warn!(%uri, %reason, "RabbitMQ blocked publishing on the connection")
                }
                Event::ConnectionUnblocked => {
                    tracing::info!(%uri, "RabbitMQ unblocked the connection")
                }
                other => tracing::debug!(%uri, event = ?other, "RabbitMQ connection event"),
            }
        }
    }))
}

impl Inner {
    /// Fails if the backend was closed or its connection is gone. `what`
    /// is formatted only for the error, never on the way to a publish.
    pub(crate) fn check_open(&self, what: fmt::Arguments<'_>) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        if !self.connection.status().connected() {
            return Err(connection_lost(&what.to_string()));
        }
        Ok(())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn declared(&self, queue: &str) -> Option<Arc<QueueConfig>> {
        self.declared
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(queue)
            .cloned()
    }

    /// Publishes a body whose size is settled: checked by [`Inner::prepare`],
    /// or a body the broker delivered to us being copied unchanged to a
    /// dead-letter queue (the broker accepted its size once already, so
    /// queuey's own limit does not apply).
    pub(crate) async fn send(&self, out: Outgoing<'_>) -> Result<(), Error> {
        self.check_open(format_args!("publishing to `{}`", out.queue))?;
        self.publisher.publish(&self.connection, out).await
    }

    /// Publishes `envelope` to its own queue.
    async fn publish_envelope(&self, envelope: &Envelope) -> Result<(), Error> {
        let prepared = self.prepare(envelope)?;
        prepared.publish_to(self, &envelope.queue).await
    }

    /// Encodes an envelope and checks its size: everything that can fail
    /// before the broker is involved.
    fn prepare(&self, envelope: &Envelope) -> Result<Prepared, Error> {
        let body = envelope.encode().map_err(|source| Error::Encode {
            queue: envelope.queue.clone(),
            source,
        })?;
        self.check_size(&envelope.queue, body.len())?;
        let properties = properties::job_properties(envelope)?;
        // The message id job_properties just wrote: the job id, formatted once.
        let message_id = properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default();
        Ok(Prepared {
            body,
            message_id,
            properties,
        })
    }

    fn check_size(&self, queue: &str, size: usize) -> Result<(), Error> {
        let limit = self.options.get_max_message_size();
        if size > limit {
            return Err(Error::MessageTooLarge {
                queue: queue.to_owned(),
                size,
                limit,
            });
        }
        Ok(())
    }

    /// Parks `envelope` in the hold queue for `delay` (rounded up), or
    /// publishes it at once for a zero delay. Every refusal happens before
    /// anything is declared or published.
    pub(crate) async fn hold(
        &self,
        envelope: &Envelope,
        delay: Duration,
        kind: HoldKind,
    ) -> Result<(), Error> {
        let queue = envelope.queue.as_str();
        let config = self.declared(queue).ok_or_else(|| Error::UnknownQueue {
            queue: queue.to_owned(),
        })?;
        let granularity = match kind {
            HoldKind::Retry => self.options.get_retry_granularity(),
            HoldKind::Deferral => self.options.get_deferred_granularity(),
        };
        let ttl_ms = topology::hold_delay_ms(queue, delay, granularity)?;
        let prepared = match kind {
            HoldKind::Deferral if envelope.priority != config.top_priority() => {
                self.prepare(&envelope.clone().with_priority(config.top_priority()))?
            }
            _ => self.prepare(envelope)?,
        };
        if ttl_ms == 0 {
            return prepared.publish_to(self, queue).await;
        }
        let hold = topology::hold_queue_name(queue, self.options.get_deferred_suffix(), ttl_ms)?;
        self.check_open(format_args!("declaring hold queue `{hold}`"))?;
        let mut declared_again = false;
        let mut attempts = 0;
        loop {
            attempts += 1;
            // Only a declaration renews a hold queue's lease (`x-expires`), and
            // an expired hold queue takes its messages with it. So the
            // publishing channel is reserved first, and nothing waits between
            // the declaration and the publish into the queue it renewed.
            let reservation = self.publisher.reserve(&self.connection).await?;
            // Taken before the declaration is sent: the broker starts the
            // lease when it handles the declaration, which is no earlier.
            let sent = Instant::now();
            self.holds
                .declare(&self.connection, &hold, &config, ttl_ms)
                .await?;
            match reservation.publish(prepared.outgoing(&hold)).await {
                Ok(()) => {
                    if self.lease_covers(&hold, &config, ttl_ms, sent).await? {
                        return Ok(());
                    }
                    if attempts >= LATE_HOLD_ATTEMPTS {
                        return Err(Error::Backend(BackendError::new(
                            BackendErrorKind::Other,
                            format!(
                                "could not make sure a job held in `{hold}` outlives the queue's \
                                 {} ms lease ({attempts} tries); a {ttl_ms} ms hold is too short \
                                 for this broker's round trips: raise the granularity",
                                2 * ttl_ms
                            ),
                        )));
                    }
                    tracing::warn!(hold = %hold, "a short hold may have expired with its job; publishing it again");
                }
                Err(Error::Backend(e))
                    if e.kind() == BackendErrorKind::Unroutable && !declared_again =>
                {
                    // The hold queue vanished between its declaration and the
                    // publish (an operator deleted it, or the broker stalled
                    // past its expiry): declare it again, once.
                    tracing::warn!(hold = %hold, "the hold queue was gone at publish time; declaring it again");
                    declared_again = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a job just confirmed into `hold` is sure to be released
    /// rather than deleted with its queue.
    ///
    /// The queue's lease runs `2 * ttl` from its last declaration; the job
    /// expires `ttl` after it landed. Confirmed within `ttl` of sending the
    /// declaration, the job lands well inside the lease. Otherwise the queue
    /// is declared again, renewing the lease past the job's expiry — which
    /// only counts if that reply came within `2 * ttl` of the first
    /// declaration, before the lease could have run out. When neither holds
    /// (only ever seen with holds of a few milliseconds on a busy broker),
    /// the job is published again: a duplicate at worst, never a loss.
    async fn lease_covers(
        &self,
        hold: &str,
        config: &QueueConfig,
        ttl_ms: u64,
        sent: Instant,
    ) -> Result<bool, Error> {
        let ttl = Duration::from_millis(ttl_ms);
        if sent.elapsed() < ttl {
            return Ok(true);
        }
        self.holds
            .declare(&self.connection, hold, config, ttl_ms)
            .await?;
        Ok(sent.elapsed() < 2 * ttl)
    }
}

/// How often a hold whose lease could not be shown to cover its job is
/// published again before the hold fails.
const LATE_HOLD_ATTEMPTS: u32 = 5;

/// An encoded envelope, checked and ready to publish.
struct Prepared {
    body: Vec<u8>,
    message_id: String,
    properties: lapin::BasicProperties,
}

impl Prepared {
    fn outgoing<'a>(&'a self, queue: &'a str) -> Outgoing<'a> {
        Outgoing {
            queue,
            body: &self.body,
            message_id: &self.message_id,
            properties: self.properties.clone(),
        }
    }

    async fn publish_to(&self, inner: &Inner, queue: &str) -> Result<(), Error> {
        inner.send(self.outgoing(queue)).await
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(events) = self.events.take() {
            events.abort();
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
                    inner.options.get_deferred_suffix(),
                    inner.options.dead_suffix_in_use(),
                )?;
            }
            inner.check_open(format_args!("declaring queues"))?;
            declare::declare_queues(&inner.connection, &inner.options, queues, |config| {
                inner
                    .declared
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(config.name().to_owned(), Arc::new(config.clone()));
            })
            .await
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
}

impl fmt::Debug for RabbitMqBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let declared = self
            .inner
            .declared
            .read()
            .map(|d| d.len())
            .unwrap_or_default();
        f.debug_struct("RabbitMqBackend")
            .field("uri", &self.inner.redacted_uri)
            .field("connected", &self.is_connected())
            .field("declared_queues", &declared)
            .field("options", &self.inner.options)
            .finish()
    }
}
