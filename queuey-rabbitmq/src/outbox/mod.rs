//! The publishing side: everything the backend publishes, and the retries
//! that make a publish either confirmed or a clear error.
//!
//! - `publisher`: the confirm-mode lanes that carry every publish;
//! - `send`: one publish, tried again until the publish bound, and a queue
//!   of the backend's own declared again when it comes back `NO_ROUTE`;
//! - `prepare`: an envelope encoded and checked before anything is sent;
//! - `hold` and `leases`: parking a job in a hold queue until its delay has
//!   passed, without a lease or a prune deleting it under it;
//! - `retire` and `prune`: deleting an unused quorum hold queue without
//!   deleting a job with it, and the backend's own pruner;
//! - `dead_letter`, `suspect` and `hand_back`: the messages for a queue's
//!   dead-letter and suspect queues, and a job handed back.
//!
//! The consumer side decides what to publish; this module publishes it.

pub(crate) mod dead_letter;
pub(crate) mod hand_back;
mod hold;
mod leases;
pub(crate) mod prepare;
mod prune;
mod publisher;
mod retire;
mod send;
pub(crate) mod suspect;
mod used;

use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::HoldKind;
use queuey_core::{Envelope, Error, QueueConfig};

use crate::link::Link;
use crate::{RabbitMqOptions, declare, error, properties, topology};
use hold::Holds;
use prepare::Prepared;
pub(crate) use prune::prune_idle_holds;
pub(crate) use publisher::Outgoing;
pub use retire::HoldPruned;
use send::Sender;

/// The publishing side of a backend: its publishing lanes and hold queues.
pub(crate) struct Outbox {
    sender: Sender,
    holds: Holds,
}

impl Outbox {
    /// Starts the publishing lanes on `link`; each opens its channel on
    /// first use. Must be called inside a tokio runtime.
    pub(crate) fn new(link: Arc<Link>, options: Arc<RabbitMqOptions>) -> Self {
        Outbox {
            sender: Sender::new(link, options),
            holds: Holds::new(),
        }
    }

    /// The backend's options.
    pub(crate) fn options(&self) -> &RabbitMqOptions {
        &self.sender.options
    }

    /// The configuration of a queue declared through this backend.
    pub(crate) fn declared(&self, queue: &str) -> Option<Arc<QueueConfig>> {
        self.sender.link.declared.get(queue)
    }

    /// Publishes `envelope` to its own queue. A queue that does not exist
    /// (`NO_ROUTE`) fails with an error that says how queues get declared.
    pub(crate) async fn publish(&self, envelope: &Envelope) -> Result<(), Error> {
        let queue = envelope.queue.as_str();
        let declared = self.declared(queue);
        let limit = self.options().settings().max_message_size();
        let prepared = Prepared::new(envelope, limit, declared.as_deref())?;
        let sent = self.sender.send(self.job(prepared, queue)).await;
        sent.map_err(|e| self.no_route_hint(e, queue, declared.is_some()))
    }

    /// A job's message to its work queue, through the job exchange when
    /// the options name one. (Hold queues are published to through the
    /// default exchange, which their dead-lettering needs anyway.)
    fn job(&self, prepared: Prepared, queue: &str) -> Outgoing {
        let mut out = prepared.outgoing(queue);
        out.exchange = self.options().job_route();
        out
    }

    /// `error` with what a job that found no queue tells the user.
    fn no_route_hint(&self, error: Error, queue: &str, declared: bool) -> Error {
        let exchange = self.options().settings().job_exchange();
        error::with_no_route_hint(error, queue, declared, exchange)
    }

    /// Enqueues `envelope` to run after `delay`, for a producer.
    ///
    /// Parked in a hold queue, except through a job exchange: a producer
    /// there may not declare hold queues (they dead-letter through the
    /// default exchange, and declaring one needs the right to publish
    /// there), so the job goes to its work queue at once, stamped with its
    /// due time, and the first worker that receives it holds it until then
    /// (see [`rehold`](crate::rehold)); it is never run early either way.
    pub(crate) async fn enqueue_after(
        &self,
        envelope: &Envelope,
        delay: Duration,
        kind: HoldKind,
    ) -> Result<(), Error> {
        if self.options().settings().job_exchange().is_none() {
            return self.hold(envelope, delay, kind).await;
        }
        let queue = envelope.queue.as_str();
        let declared = self.declared(queue);
        let options = self.options();
        // The refusals of a hold, before anything is sent.
        let ttl_ms = hold::ttl_ms(queue, delay, kind, options)?;
        if kind == HoldKind::Deferral && declared.is_none() {
            let queue = queue.to_owned();
            return Err(Error::UnknownQueue { queue });
        }
        let prepared = self.prepare_held(envelope, kind, declared.as_deref())?;
        let mut out = self.job(prepared, queue);
        if ttl_ms > 0 {
            out.properties = properties::with_due_at(out.properties, hold::due_at_ms(delay));
        }
        let sent = self.sender.send(out).await;
        sent.map_err(|e| self.no_route_hint(e, queue, declared.is_some()))
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
        self.hold_until(envelope, delay, hold::due_at_ms(delay), kind)
            .await
    }

    /// Encodes a job held as `kind`: a deferral comes back at its queue's
    /// top priority (`config`, the queue's declared configuration).
    fn prepare_held(
        &self,
        envelope: &Envelope,
        kind: HoldKind,
        config: Option<&QueueConfig>,
    ) -> Result<Prepared, Error> {
        let limit = self.options().settings().max_message_size();
        match (kind, config) {
            (HoldKind::Deferral, Some(config)) if envelope.priority != config.top_priority() => {
                let envelope = envelope.clone().with_priority(config.top_priority());
                Prepared::new(&envelope, limit, Some(config))
            }
            _ => Prepared::new(envelope, limit, config),
        }
    }

    /// Parks `envelope` for `delay`, stamping `due_at_ms` as its due time
    /// (a job that came back before it is held again with its first).
    pub(crate) async fn hold_until(
        &self,
        envelope: &Envelope,
        delay: Duration,
        due_at_ms: u64,
        kind: HoldKind,
    ) -> Result<(), Error> {
        let queue = envelope.queue.as_str();
        let config = self.declared(queue).ok_or_else(|| Error::UnknownQueue {
            queue: queue.to_owned(),
        })?;
        let options = self.options();
        let ttl_ms = hold::ttl_ms(queue, delay, kind, options)?;
        let prepared = self.prepare_held(envelope, kind, Some(&config))?;
        if ttl_ms == 0 {
            let sent = self.sender.send(self.job(prepared, queue)).await;
            return sent.map_err(|e| self.no_route_hint(e, queue, true));
        }
        let ttl_ms = ttl_ms.max(topology::SHORTEST_HOLD_MS);
        let hold = options
            .hold_queues
            .name(queue, options.settings().deferred_suffix(), ttl_ms)?;
        let mut out = prepared.outgoing(&hold);
        out.properties = properties::with_due_at(out.properties, due_at_ms);
        let now_ms = queuey_core::__private::now_ms();
        if let Some(expiration) = hold::expiration_ms(due_at_ms, now_ms, ttl_ms) {
            out.properties = properties::with_expiration(out.properties, expiration);
        }
        self.holds
            .park(&self.sender, &config, ttl_ms, out, options.hold_queues)
            .await
    }

    /// Publishes a dead letter (see [`dead_letter::letter`]) into the
    /// dead-letter queue of `config`'s queue, declaring that queue again
    /// if it is gone.
    pub(crate) async fn dead_letter(
        &self,
        letter: Outgoing,
        config: &QueueConfig,
    ) -> Result<(), Error> {
        let dead = letter.queue.clone();
        let declare = |current: crate::link::Current| async move {
            declare::declare_dead_letter_queue(&current.connection, &dead, config).await
        };
        self.sender
            .send_declaring(letter, "dead-letter queue", declare)
            .await
    }

    /// Publishes a suspect copy (see [`suspect::copy`]) into the suspect
    /// queue of `config`'s queue, declaring that queue again if it is gone.
    pub(crate) async fn suspect(&self, copy: Outgoing, config: &QueueConfig) -> Result<(), Error> {
        let suspect = copy.queue.clone();
        let options = self.options();
        let declare = |current: crate::link::Current| async move {
            declare::declare_suspect_queue(&current.connection, &suspect, options, config).await
        };
        self.sender
            .send_declaring(copy, "suspect queue", declare)
            .await
    }

    /// Publishes a job handed back (see [`hand_back::copy`]) into the
    /// queue it was consumed from: the work queue, or its suspect queue
    /// (`suspect`, declared again if it is gone).
    pub(crate) async fn hand_back(
        &self,
        copy: Outgoing,
        config: &QueueConfig,
        suspect: bool,
    ) -> Result<(), Error> {
        if suspect {
            return self.suspect(copy, config).await;
        }
        let queue = copy.queue.clone();
        let sent = self.sender.send(copy).await;
        sent.map_err(|e| error::with_no_route_hint(e, &queue, true, None))
    }

    /// Publishes a message of the control stream (a command or a sync
    /// marker, built by `control`), declaring the stream again if it is
    /// gone.
    #[cfg(feature = "fleet")]
    pub(crate) async fn control(&self, out: Outgoing) -> Result<(), Error> {
        self.stream(out, declare::Stream::Control).await
    }

    /// Publishes a message of a stream of `kind`, declaring the stream
    /// again if it is gone.
    #[cfg(feature = "fleet")]
    pub(crate) async fn stream(&self, out: Outgoing, kind: declare::Stream) -> Result<(), Error> {
        let stream = out.queue.clone();
        let declare = |current: crate::link::Current| async move {
            declare::declare_stream(&current.connection, &stream, kind).await
        };
        self.sender.send_declaring(out, kind.name(), declare).await
    }

    /// Closes the publishing side: later publishes and holds fail with
    /// [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.sender.publisher.close();
        self.holds.close();
    }
}
