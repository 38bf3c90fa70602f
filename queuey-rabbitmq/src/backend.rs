//! The backend: the link to RabbitMQ, the publishing side and the
//! consumers, put together, and the [`Backend`] implementation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use queuey_core::backend::HoldKind;
use queuey_core::backend::{
    Backend, Capabilities, ConnectionState, DeliveryStream, PendingReply, Replies, Reply, ReplyTo,
};
#[cfg(feature = "fleet")]
use queuey_core::backend::{ControlChannel, Heartbeats};
#[cfg(feature = "fleet")]
use queuey_core::control::{ControlRecord, ControlView, Heartbeat};
use queuey_core::{Envelope, Error, QueueConfig};

use crate::addresses::Addresses;
use crate::census::HoldCensus;
#[cfg(feature = "fleet")]
use crate::fleet::Fleet;
use crate::link::{Link, Purpose};
use crate::outbox::{HoldPruned, Outbox, prune_idle_holds};
use crate::reply::{Requests, Responder};
use crate::trust::Senders;
use crate::{RabbitMqOptions, consumer, declare};

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

struct Inner {
    options: Arc<RabbitMqOptions>,
    /// The connection of the moment, replaced when it dies.
    link: Arc<Link>,
    /// Every publish: enqueues, holds, dead letters and suspect copies.
    outbox: Arc<Outbox>,
    /// Jobs a caller waits for, on a channel of their own.
    requests: Requests,
    /// Job results, sent to the callers that wait for them.
    responder: Responder,
    /// Control commands, heartbeats and leadership, with the `fleet`
    /// feature.
    #[cfg(feature = "fleet")]
    fleet: Fleet,
    /// Consumers of dropped streams handing their deliveries back.
    retirements: Arc<consumer::Retirements>,
    /// What counts a hold's jobs before a prune, when anything can.
    census: Option<Arc<dyn HoldCensus>>,
    /// Who this backend signs as, and whom it trusts on the fleet plane.
    senders: Arc<Senders>,
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
    /// A broker that cannot be reached yet (down, restarting, still
    /// booting) is waited for, up to
    /// [`connect_wait`](RabbitMqOptions::connect_wait) (2 minutes by
    /// default): the call returns once connected, or with the last
    /// attempt's error once the bound has passed. Credentials or a virtual
    /// host the broker refuses, a TLS handshake that fails and an invalid
    /// address fail at once, waiting or not. An address where nothing
    /// accepts the connection fails with an error that names it and says to
    /// check that RabbitMQ runs there and that the address (`AMQP_URL`, say)
    /// is right. Errors never contain a password.
    pub async fn with_options(
        addresses: impl Addresses,
        options: RabbitMqOptions,
    ) -> Result<Self, Error> {
        options.validate()?;
        let options = Arc::new(options);
        let addresses = addresses.into_addresses();
        let senders = Arc::new(Senders::of(&addresses, &options)?);
        let link = Link::connect(&addresses, Arc::clone(&options), Purpose::Jobs).await?;
        let outbox = Arc::new(Outbox::new(Arc::clone(&link), Arc::clone(&options)));
        // Else, with the `management` feature, the first address's
        // management API counts a hold's jobs.
        let census = options.census.0.clone();
        #[cfg(feature = "management")]
        let census = census
            .or_else(|| crate::management::census(addresses.first().map(String::as_str), &options));
        if let (Some(after), Some(census)) = (options.prune_holds_after, &census) {
            let pruning = prune_idle_holds(Arc::downgrade(&outbox), after, Arc::clone(census));
            tokio::spawn(pruning);
        }
        let requests = Requests::new(&link, &options, &senders);
        let responder = Responder::new(&link, &options, &senders);
        #[cfg(feature = "fleet")]
        let fleet = Fleet::new(&addresses, &link, &outbox, &options, &senders);
        Ok(RabbitMqBackend {
            inner: Arc::new(Inner {
                options,
                link,
                outbox,
                requests,
                responder,
                #[cfg(feature = "fleet")]
                fleet,
                retirements: Arc::default(),
                census,
                senders,
            }),
        })
    }

    /// The options the backend was built with.
    pub fn options(&self) -> &RabbitMqOptions {
        &self.inner.options
    }

    /// Whether this backend accepts heartbeats, schedule states and job
    /// results signed by the RabbitMQ user `user_id` (a message's
    /// `user_id` property; `None` for an unsigned one): its own user and
    /// those of [`worker_senders`](RabbitMqOptions::worker_senders). See
    /// [Who may send what](crate#who-may-send-what).
    pub fn trusts_worker(&self, user_id: Option<&str>) -> bool {
        let mut properties = lapin::BasicProperties::default();
        if let Some(user) = user_id {
            properties = properties.with_user_id(crate::properties::short(user));
        }
        self.inner
            .senders
            .admit(crate::trust::Role::Worker, &properties)
            .is_ok()
    }

    /// Whether the connection is up and the backend not closed.
    pub fn is_connected(&self) -> bool {
        self.inner.link.state() == ConnectionState::Connected
    }

    /// Deletes `hold`, a quorum hold queue of the work queue `queue`, if it
    /// is empty and nobody uses it, without ever deleting a job with it (see
    /// [Pruning hold queues](crate#pruning-hold-queues)): for the holds the
    /// backend does not prune by itself
    /// ([`RabbitMqOptions::prune_holds_after`]), such as those of a delay no
    /// longer in use; `queuey holds prune` calls it. It takes at least ten
    /// seconds for an empty hold (the watch), and a job that reaches it
    /// meanwhile keeps it ([`HoldPruned::InUse`]). A backend with no census
    /// keeps every hold ([`HoldPruned::Unverified`]).
    ///
    /// Fails with [`Error::InvalidConfig`] when `hold` is not a quorum hold
    /// of `queue` with this backend's deferred suffix (classic holds expire
    /// by themselves).
    ///
    /// ```no_run
    /// # async fn run(backend: queuey_rabbitmq::RabbitMqBackend) -> Result<(), queuey_core::Error> {
    /// use queuey_rabbitmq::HoldPruned;
    ///
    /// let hold = "app.emails.deferred.quorum.1000";
    /// match backend.prune_hold("app.emails", hold).await? {
    ///     HoldPruned::Deleted { rescued } => println!("deleted ({rescued} jobs moved back)"),
    ///     kept => println!("kept: {kept:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn prune_hold(&self, queue: &str, hold: &str) -> Result<HoldPruned, Error> {
        self.inner.link.ensure_open()?;
        match &self.inner.census {
            Some(census) => self.inner.outbox.retire_hold(queue, hold, &**census).await,
            None => Ok(HoldPruned::Unverified),
        }
    }

    /// Closes the connection, within the call timeout whatever state its
    /// channels are in. Consumer streams dropped just before finish handing
    /// back what they had buffered first (within the call timeout); streams
    /// still open end, their unsettled deliveries go back to their queues,
    /// and every later call fails with [`Error::ShutDown`]. Closing twice
    /// is a no-op.
    pub async fn close(&self) -> Result<(), Error> {
        self.flush().await;
        self.inner.outbox.close();
        self.inner.requests.close().await;
        #[cfg(feature = "fleet")]
        let fleet = self.inner.fleet.close().await;
        #[cfg(not(feature = "fleet"))]
        let fleet = Ok(());
        self.inner.link.close().await.and(fleet)
    }
}

/// Leadership of periodic schedules through a single-active-consumer
/// quorum queue per schedule, on the backend's connection: see the guide's
/// section on periodic jobs for why it holds and its limits.
#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
impl queuey_core::periodic::Leadership for RabbitMqBackend {
    fn lead<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn queuey_core::periodic::Lease>, Error>> {
        Box::pin(self.inner.fleet.lead(key))
    }
}

impl Backend for RabbitMqBackend {
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let Inner { options, link, .. } = &*self.inner;
            for config in queues {
                config.validate()?;
            }
            // A sharded queue is its lane and its shards.
            let queues: Vec<QueueConfig> = queues.iter().flat_map(QueueConfig::physical).collect();
            for config in &queues {
                declare::check(config, options)?;
            }
            link.ensure_open()?;
            let queues = &queues;
            link.call("declaring queues", |current| async move {
                declare::declare_queues(&current.connection, options, queues, |config| {
                    link.declared.remember(config)
                })
                .await
            })
            .await
        })
    }

    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.inner.outbox.publish(envelope))
    }

    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        let outbox = &self.inner.outbox;
        Box::pin(outbox.enqueue_after(envelope, delay, HoldKind::Retry))
    }

    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        let outbox = &self.inner.outbox;
        Box::pin(outbox.enqueue_after(envelope, delay, HoldKind::Deferral))
    }

    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>> {
        let link = Arc::clone(&self.inner.link);
        let outbox = Arc::clone(&self.inner.outbox);
        let retirements = Arc::clone(&self.inner.retirements);
        Box::pin(consumer::consume(link, outbox, retirements, queue))
    }

    fn connection_state(&self) -> ConnectionState {
        self.inner.link.state()
    }

    /// Told by the link as its state changes: no polling.
    fn connection_changed(&self, seen: ConnectionState) -> BoxFuture<'_, ConnectionState> {
        Box::pin(self.inner.link.changed(seen))
    }

    /// The broker's consumer timeout as
    /// [`RabbitMqOptions::consumer_timeout`] gives it (30 minutes unless
    /// set), for every queue.
    fn consumer_timeout(&self, _queue: &QueueConfig) -> Option<Duration> {
        self.inner.options.consumer_timeout
    }

    /// Replies, and with the `fleet` feature control commands and
    /// heartbeats.
    fn capabilities(&self) -> Capabilities<'_> {
        let capabilities = Capabilities::none().with_replies(self);
        #[cfg(feature = "fleet")]
        let capabilities = capabilities.with_control(self).with_heartbeats(self);
        capabilities
    }

    /// Waits, up to the call bound, for the deliveries of dropped streams
    /// being handed back.
    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let retiring = self.inner.retirements.finished();
            let _ = tokio::time::timeout(self.inner.options.call_timeout, retiring).await;
        })
    }
}

impl Replies for RabbitMqBackend {
    /// Publishes on the backend's request channel (opened on the first
    /// wait, in confirm mode, consuming `amq.rabbitmq.reply-to`), one
    /// request at a time; see the guide's section on job results.
    fn request<'a>(&'a self, envelope: Envelope) -> BoxFuture<'a, Result<PendingReply, Error>> {
        Box::pin(self.inner.requests.request(envelope))
    }

    /// Publishes the reply to the request's address through the default
    /// exchange, on the backend's reply channel.
    fn reply<'a>(&'a self, to: &'a ReplyTo, reply: Reply) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { self.inner.responder.reply(to, &reply).await })
    }
}

#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
impl ControlChannel for RabbitMqBackend {
    /// Publishes the command to the control stream (declared first, once
    /// per backend) and waits for the broker's confirm. A record without a
    /// sender (`by`) is sent as this backend's: its connection name and
    /// its host name. See [Control commands](crate#control-commands).
    fn send_control<'a>(&'a self, record: &'a ControlRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.inner.fleet.control.send(record))
    }

    /// Starts the backend's follower of the control stream on the first
    /// call, and returns once it has read every command sent before the
    /// call (within the call timeout). See [Control
    /// commands](crate#control-commands).
    fn follow_control<'a>(&'a self) -> BoxFuture<'a, Result<ControlView, Error>> {
        Box::pin(self.inner.fleet.control.follow())
    }
}

#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
impl Heartbeats for RabbitMqBackend {
    /// Publishes the heartbeat to the heartbeat stream (the control
    /// stream's name with `.workers`), declared first, once per backend.
    /// See [Control commands](crate#control-commands).
    fn heartbeat<'a>(&'a self, beat: &'a Heartbeat) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.inner.fleet.heartbeats.send(beat))
    }

    /// Reads the heartbeat stream's last minute and lists the workers whose
    /// latest heartbeat is within its lifetime (by this host's clock, with
    /// two seconds of slack) and not their last.
    fn workers<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Heartbeat>, Error>> {
        Box::pin(self.inner.fleet.heartbeats.workers())
    }
}

impl fmt::Debug for RabbitMqBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let declared = self.inner.link.declared.count();
        f.debug_struct("RabbitMqBackend")
            .field("uri", &self.inner.link.redacted_uri())
            .field("connected", &self.is_connected())
            .field("declared_queues", &declared)
            .field("options", &self.inner.options)
            .finish()
    }
}
