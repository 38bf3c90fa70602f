//! The builder of a backend's settings.

use std::collections::BTreeMap;
use std::time::Duration;

use queuey_core::MAX_MESSAGE_BYTES;
use queuey_core::backend::Granularity;

use super::defaults::*;
use crate::census::{HoldCensus, SharedCensus};
use crate::tls::TlsOptions;
use crate::topology::HoldQueues;

/// Settings of a [`RabbitMqBackend`](crate::RabbitMqBackend).
///
/// Every builder takes and returns `self`. Nothing is checked until the
/// backend connects, which refuses inconsistent values with
/// [`Error::InvalidConfig`](queuey_core::Error::InvalidConfig) instead of panicking.
///
/// The suffixes are part of the queue names the backend computes: every
/// process sharing a queue must use the same ones.
///
/// ```
/// use std::time::Duration;
/// use queuey_rabbitmq::RabbitMqOptions;
///
/// let options = RabbitMqOptions::default()
///     .connection_name("billing-worker")
///     .dead_suffix("-dlq")
///     .retry_granularity(Duration::from_secs(10));
/// assert_eq!(options.settings().dead_suffix(), "-dlq");
/// assert_eq!(options.settings().retry_granularity(), Duration::from_secs(10).into());
/// ```
///
/// Set a value with its builder method, read it back with
/// [`settings`](Self::settings) and the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RabbitMqOptions {
    pub(crate) connection_name: Option<String>,
    pub(crate) client_properties: BTreeMap<String, String>,
    pub(crate) locale: Option<String>,
    pub(crate) dead_suffix: String,
    pub(crate) declare_dead_letter_queues: bool,
    pub(crate) deferred_suffix: String,
    pub(crate) suspect_suffix: String,
    pub(crate) poison_guard: Option<u32>,
    pub(crate) retry_granularity: Option<Granularity>,
    pub(crate) deferred_granularity: Option<Granularity>,
    pub(crate) hold_queues: HoldQueues,
    pub(crate) prune_holds_after: Option<Duration>,
    pub(crate) publish_concurrency: usize,
    pub(crate) publish_window: usize,
    pub(crate) max_message_size: usize,
    pub(crate) heartbeat: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) connect_wait: Duration,
    pub(crate) call_timeout: Duration,
    pub(crate) publish_timeout: Duration,
    pub(crate) reconnect_delay: (Duration, Duration),
    pub(crate) reconnect_deadline: Option<Duration>,
    pub(crate) consumer_timeout: Option<Duration>,
    pub(crate) refuse_long_delays: bool,
    pub(crate) tls: TlsOptions,
    #[cfg(feature = "fleet")]
    pub(crate) control_stream: String,
    #[cfg(feature = "fleet")]
    pub(crate) control_senders: Vec<String>,
    #[cfg(feature = "fleet")]
    pub(crate) control_snapshot_interval: Duration,
    pub(crate) worker_senders: Vec<String>,
    pub(crate) authenticated_user: Option<String>,
    pub(crate) job_exchange: Option<String>,
    #[cfg(feature = "management")]
    pub(crate) management_url: super::management_settings::ManagementUrl,
    pub(crate) census: SharedCensus,
}

impl Default for RabbitMqOptions {
    /// Every setting at the default its builder method gives.
    fn default() -> Self {
        RabbitMqOptions {
            connection_name: None,
            client_properties: BTreeMap::new(),
            locale: None,
            dead_suffix: ".dead".to_owned(),
            declare_dead_letter_queues: true,
            deferred_suffix: ".deferred".to_owned(),
            suspect_suffix: ".suspect".to_owned(),
            poison_guard: Some(DEFAULT_POISON_GUARD_LIMIT),
            retry_granularity: None,
            deferred_granularity: None,
            hold_queues: HoldQueues::Quorum,
            prune_holds_after: Some(DEFAULT_PRUNE_HOLDS_AFTER),
            publish_concurrency: DEFAULT_PUBLISH_CONCURRENCY,
            publish_window: DEFAULT_PUBLISH_WINDOW,
            max_message_size: MAX_MESSAGE_BYTES,
            heartbeat: DEFAULT_HEARTBEAT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            connect_wait: DEFAULT_CONNECT_WAIT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            reconnect_delay: (DEFAULT_RECONNECT_DELAY_MIN, DEFAULT_RECONNECT_DELAY_MAX),
            reconnect_deadline: None,
            consumer_timeout: Some(DEFAULT_CONSUMER_TIMEOUT),
            refuse_long_delays: false,
            tls: TlsOptions::default(),
            #[cfg(feature = "fleet")]
            control_stream: crate::topology::CONTROL_STREAM.to_owned(),
            #[cfg(feature = "fleet")]
            control_senders: Vec::new(),
            #[cfg(feature = "fleet")]
            control_snapshot_interval: DEFAULT_CONTROL_SNAPSHOT_INTERVAL,
            worker_senders: Vec::new(),
            authenticated_user: None,
            job_exchange: None,
            #[cfg(feature = "management")]
            management_url: super::management_settings::ManagementUrl::default(),
            census: SharedCensus::default(),
        }
    }
}

/// Builder methods that set the field of their name to a value made of
/// their arguments: `name(arg: Type) = value;`.
macro_rules! set {
    ($($(#[$attr:meta])* $name:ident($($arg:ident: $ty:ty),+) = $value:expr;)*) => {
        impl RabbitMqOptions {
            $(
                $(#[$attr])*
                pub fn $name(mut self, $($arg: $ty),+) -> Self {
                    self.$name = $value;
                    self
                }
            )*
        }
    };
}
#[cfg(any(feature = "fleet", feature = "management"))]
pub(super) use set;

set! {
    /// The heartbeat interval asked of the broker (default
    /// [`DEFAULT_HEARTBEAT`], 10 s). A connection that hears nothing for two
    /// intervals is declared dead and replaced, so this bounds how long a
    /// silent network partition goes unnoticed. A `heartbeat=` in the URI's
    /// query wins. Zero turns heartbeats off (not recommended).
    heartbeat(interval: Duration) = interval;

    /// The bound on opening one connection, TCP and AMQP handshake together
    /// (default [`DEFAULT_CONNECT_TIMEOUT`], 10 s). A `connection_timeout=`
    /// in the URI's query wins.
    connect_timeout(timeout: Duration) = timeout;

    /// How long [`RabbitMqBackend::with_options`](crate::RabbitMqBackend::with_options)
    /// waits for a broker it cannot reach yet (down, restarting, booting;
    /// default [`DEFAULT_CONNECT_WAIT`], 2 minutes), trying every address in
    /// turn and pausing between rounds as a reconnection does
    /// ([`reconnect_delay`](Self::reconnect_delay)). It logs a WARN line
    /// (password masked) at the first failure, then at most one every 10 s.
    ///
    /// Only an unreachable broker is waited for (a refused or reset
    /// connection, a timeout, an unreachable network, a host name that does
    /// not resolve yet, a handshake closed while the broker starts); refused
    /// credentials, a missing virtual host, a failed TLS handshake and an
    /// invalid URI fail at once. Past the bound, the last attempt's error is
    /// returned, naming the bound; [`Duration::ZERO`] tries each address
    /// once. The wait counts in `queuey_rabbitmq_disconnected_seconds_total`,
    /// and `queuey_rabbitmq_connected` is 0 meanwhile.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// // A command-line tool: report an unreachable broker at once.
    /// let tool = RabbitMqOptions::default().connect_wait(Duration::ZERO);
    /// // A worker that may start long before its broker (a cluster booting).
    /// let worker = RabbitMqOptions::default().connect_wait(Duration::from_secs(600));
    /// # let _ = (tool, worker);
    /// ```
    connect_wait(wait: Duration) = wait;

    /// The bound on every broker call other than a publish: declarations,
    /// acks and nacks, opening channels, consuming, closing (default
    /// [`DEFAULT_CALL_TIMEOUT`], 30 s). A call past it fails with
    /// [`BackendErrorKind::TimedOut`](queuey_core::BackendErrorKind::TimedOut).
    call_timeout(timeout: Duration) = timeout;

    /// The bound on one publish (enqueue, hold, dead letter), from the call
    /// to the broker's confirmation, including any wait for a reconnection
    /// (default [`DEFAULT_PUBLISH_TIMEOUT`], 30 s). Past it the publish fails
    /// with [`BackendErrorKind::TimedOut`](queuey_core::BackendErrorKind::TimedOut):
    /// the broker may still have taken the message, so publishing it again
    /// (same job id) is the safe answer.
    publish_timeout(timeout: Duration) = timeout;

    /// The pauses between reconnection attempts: the first is `min`, each
    /// next one doubles up to `max`, each with full jitter (defaults
    /// 100 ms and 5 s).
    reconnect_delay(min: Duration, max: Duration) = (min, max);

    /// Refuse delays longer than one hold queue keeps a job (about 24 days)
    /// with [`Error::DelayTooLong`](queuey_core::Error::DelayTooLong), as the
    /// first version did, instead of holding them in legs of 24 days (the
    /// default, which needs every consumer of the queue to be a version that
    /// checks due times; see [Topology and holds](crate#topology-and-holds)).
    refuse_long_delays(refuse: bool) = refuse;

    /// How long the backend keeps trying to reconnect before it gives up
    /// for good (its calls then fail and workers stop). `None`, the
    /// default, keeps trying for as long as the process runs.
    reconnect_deadline(deadline: Option<Duration>) = deadline;

    /// The broker's delivery acknowledgement timeout, `consumer_timeout` in
    /// `rabbitmq.conf` (default [`DEFAULT_CONSUMER_TIMEOUT`], RabbitMQ's own
    /// 30 minutes); `None` when it does not apply.
    ///
    /// RabbitMQ closes a consumer's channel once a delivery on it has gone
    /// unacknowledged that long (up to a minute late): the job is delivered
    /// again while its first run still runs, with every other delivery the
    /// channel held. The backend cannot read the broker's configuration, so
    /// [`Backend::consumer_timeout`](queuey_core::backend::Backend::consumer_timeout)
    /// answers this value, and a worker whose job timeout does not fit under
    /// it refuses to build; `None` turns the check off. From RabbitMQ 4.3 on
    /// only quorum queues have a consumer timeout. A per-queue timeout
    /// (policy or `x-consumer-timeout`) is not seen: give the lowest that
    /// applies.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// // rabbitmq.conf: consumer_timeout = 7200000
    /// let options = RabbitMqOptions::default().consumer_timeout(Some(Duration::from_secs(2 * 3600)));
    /// # let _ = options;
    /// ```
    consumer_timeout(timeout: Option<Duration>) = timeout;

    /// How `amqps://` addresses are secured: extra CA certificates, a
    /// client certificate, the server name to verify (default: the
    /// platform's roots, no client certificate, the URI's host). See
    /// [`TlsOptions`]; plain `amqp://` addresses ignore it.
    tls(tls: TlsOptions) = tls;

    /// The name the connection shows on the broker (management UI,
    /// `rabbitmqctl list_connections client_properties`). Unset by default.
    connection_name(name: impl Into<String>) = Some(name.into());

    /// The AMQP locale sent when connecting (default: the client's, `en_US`).
    locale(locale: impl Into<String>) = Some(locale.into());

    /// Suffix of the dead-letter queue's name (default `.dead`); must not be
    /// empty.
    dead_suffix(suffix: impl Into<String>) = suffix.into();

    /// Whether `declare` creates `q{dead_suffix}` and dead letters are
    /// published there (default `true`).
    ///
    /// When `false`, a dead-lettered delivery is rejected without requeue,
    /// so whatever dead-letter policy the broker has for the queue applies
    /// (without one, the broker drops it); each such rejection is logged.
    declare_dead_letter_queues(declare: bool) = declare;

    /// Suffix in hold-queue names, before the `.{ttl_ms}` (default
    /// `.deferred`; quorum hold queues add `.quorum` after it).
    deferred_suffix(suffix: impl Into<String>) = suffix.into();

    /// The [poison guard](crate#poison-guard): `Some(limit)` dead-letters a
    /// job once `limit` of its deliveries in a row ended without being
    /// settled (its worker died, or lost its connection, while it had the
    /// job), `None` turns the guard off. Default
    /// `Some(`[`DEFAULT_POISON_GUARD_LIMIT`]`)`; `Some(0)` is refused.
    ///
    /// With the guard on, `declare` also creates each work queue's suspect
    /// queue (`q{suspect_suffix}`), which every consumer of `q` takes from
    /// too, one job at a time. Turning the guard off leaves jobs already in
    /// a suspect queue there: drain it first or keep one consumer with the
    /// guard on.
    poison_guard(limit: Option<u32>) = limit;

    /// Suffix of the suspect queue's name (default `.suspect`); must not be
    /// empty or the dead-letter suffix.
    suspect_suffix(suffix: impl Into<String>) = suffix.into();

    /// Rounding for retry backoffs and delayed enqueues: a step
    /// (`Duration`) or any [`Granularity`]. The default depends on the hold
    /// queues: [`DEFAULT_QUORUM_GRANULARITY`] (10 % buckets) with quorum
    /// holds, [`DEFAULT_CLASSIC_GRANULARITY`] (1 s) with classic ones.
    ///
    /// Delays are rounded up to a multiple of a step (zero or sub-millisecond
    /// steps count as 1 ms), which bounds how many hold queues a queue can
    /// have: 300 with 1 s and backoff capped at five minutes.
    /// [`Granularity::relative`] rounds into buckets that grow by a
    /// percentage, so the number of hold queues grows with the logarithm of
    /// the longest delay. The bucket bounds how late a job can be: each job
    /// also carries what remains of its delay as its own time to live, and
    /// leaves its hold when due unless one due later is ahead of it there.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_core::backend::Granularity;
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// let options = RabbitMqOptions::default()
    ///     .retry_granularity(Granularity::relative(10, Duration::from_secs(1)));
    /// # let _ = options;
    /// ```
    retry_granularity(granularity: impl Into<Granularity>) = Some(granularity.into());

    /// Rounding for deferrals: a step (`Duration`) or any [`Granularity`],
    /// with the same default as
    /// [`retry_granularity`](Self::retry_granularity). Zero or
    /// sub-millisecond steps count as 1 ms.
    deferred_granularity(granularity: impl Into<Granularity>) = Some(granularity.into());

    /// Which hold queues park retried, deferred and delayed jobs (default
    /// [`HoldQueues::Quorum`]).
    ///
    /// Quorum hold queues keep every job through a broker crash; classic
    /// ones can lose the jobs moving back to their work queue when the
    /// broker dies (see [`HoldQueues`]), and cannot serve a quorum work
    /// queue. Each distinct rounded delay is a quorum hold queue that stays
    /// until [pruned](crate#pruning-hold-queues) (`queuey holds` lists
    /// them); never delete one by hand while jobs may be held in it.
    ///
    /// ```
    /// use queuey_rabbitmq::{HoldQueues, RabbitMqOptions};
    ///
    /// // The first version's holds, exactly: classic queues, 1 s steps.
    /// let options = RabbitMqOptions::default().hold_queues(HoldQueues::Classic);
    /// # let _ = options;
    /// ```
    hold_queues(holds: HoldQueues) = holds;

    /// How long a quorum hold queue this backend parked jobs in may go
    /// unused by it before the backend deletes it (default
    /// [`DEFAULT_PRUNE_HOLDS_AFTER`], an hour; `None` keeps every hold).
    ///
    /// Every quarter of that time (at most every 15 minutes) the backend
    /// deletes such holds that are empty and unused, after watching each for
    /// ten seconds, **when it can count their jobs** through a [`HoldCensus`]
    /// ([`hold_census`](Self::hold_census), or the `management` feature):
    /// see [Pruning hold queues](crate#pruning-hold-queues). A hold it
    /// cannot count, or still in use, is kept; one deleted and needed again
    /// is declared again. Holds the process never used are left to `queuey
    /// holds prune`; classic holds expire by themselves.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// let options = RabbitMqOptions::default().prune_holds_after(Some(Duration::from_secs(6 * 3600)));
    /// assert_eq!(options.settings().prune_holds_after(), Some(Duration::from_secs(6 * 3600)));
    /// ```
    prune_holds_after(idle: Option<Duration>) = idle;

    /// How many publishing channels the backend keeps (default
    /// [`DEFAULT_PUBLISH_CONCURRENCY`], at most [`MAX_PUBLISH_CONCURRENCY`]).
    ///
    /// Each channel keeps up to [`publish_window`](Self::publish_window)
    /// publishes in flight, and is opened on first use. A publish goes to
    /// the channel with the fewest outstanding.
    publish_concurrency(channels: usize) = channels;

    /// How many publishes may be in flight (sent, not yet confirmed) on one
    /// publishing channel (default [`DEFAULT_PUBLISH_WINDOW`], at most
    /// [`MAX_PUBLISH_WINDOW`]). A larger window lets the broker confirm
    /// many messages with one acknowledgement; `1` waits for each
    /// confirmation before the channel's next publish.
    publish_window(publishes: usize) = publishes;

    /// The RabbitMQ user this backend is when it logs in with a client
    /// certificate (`EXTERNAL`, no user name in its URI): the name RabbitMQ
    /// maps the certificate to (its subject's distinguished name, or its
    /// common name with `ssl_cert_login_from = common_name`). What the
    /// backend sends to the fleet is signed with it; without it, such a
    /// backend cannot send to the fleet.
    authenticated_user(user: impl Into<String>) = Some(user.into());

    /// Publishes jobs through `exchange`, an exchange of the application's,
    /// instead of RabbitMQ's default exchange (the default), so that a
    /// producer reaches only the queues bound to it rather than every queue
    /// of the virtual host, the fleet's streams included.
    ///
    /// The backend declares `exchange` (durable, `direct`) with its queues
    /// and binds each work queue, shard and hold queue to it under its own
    /// name; every job it enqueues, retries or defers is published there.
    /// Dead letters, suspect copies, hand-backs and fleet messages still
    /// use the default exchange. Give every producer and worker of the
    /// queues the same exchange; see [Who may send
    /// what](crate#who-may-send-what) for the permissions and how to move a
    /// running fleet.
    ///
    /// ```
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// let options = RabbitMqOptions::default().job_exchange("billing.jobs");
    /// assert_eq!(options.settings().job_exchange(), Some("billing.jobs"));
    /// ```
    job_exchange(exchange: impl Into<String>) = Some(exchange.into());

    /// The largest message body the backend publishes, in bytes (default
    /// 16 MiB, RabbitMQ 4's own limit). Larger bodies are refused with
    /// [`Error::MessageTooLarge`](queuey_core::Error::MessageTooLarge) before anything is sent.
    max_message_size(bytes: usize) = bytes;
}

impl RabbitMqOptions {
    /// Sets the connection's name, client properties and locale at once,
    /// replacing any set before (the first version's `connection_properties` option,
    /// with queuey's own [`ConnectionProperties`](crate::ConnectionProperties)).
    pub fn connection_properties(mut self, properties: crate::ConnectionProperties) -> Self {
        self.connection_name = properties.connection_name;
        self.client_properties = properties.client_properties;
        self.locale = properties.locale;
        self
    }

    /// Adds a client property sent to the broker when connecting (as a
    /// string). Keys are at most 255 bytes.
    pub fn client_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.client_properties.insert(key.into(), value.into());
        self
    }

    /// What the backend's pruner asks for the jobs of a hold that AMQP
    /// cannot count (see [`HoldCensus`]); a hold it cannot count is kept.
    /// Without one the backend asks the management API with the
    /// `management` feature, and otherwise prunes nothing by itself:
    /// [`prune_holds_after`](Self::prune_holds_after) does nothing and
    /// [`RabbitMqBackend::prune_hold`](crate::RabbitMqBackend::prune_hold)
    /// keeps every hold.
    pub fn hold_census(mut self, census: impl HoldCensus + 'static) -> Self {
        self.census = SharedCensus(Some(std::sync::Arc::new(census)));
        self
    }

    /// RabbitMQ users, besides the one this backend logs in as, whose
    /// heartbeats, schedule states and job results this backend accepts:
    /// the users your workers log in as. By default none. An operator tool
    /// or a program that waits for results with credentials of its own
    /// names the workers' user here; see
    /// [Who may send what](crate#who-may-send-what).
    pub fn worker_senders<I, S>(mut self, users: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.worker_senders = users.into_iter().map(Into::into).collect();
        self
    }

    /// The granularity of both kinds of hold when none is set: the default
    /// of the hold queues in use.
    pub(crate) fn default_granularity(&self) -> Granularity {
        match self.hold_queues {
            HoldQueues::Classic => DEFAULT_CLASSIC_GRANULARITY,
            _ => DEFAULT_QUORUM_GRANULARITY,
        }
    }

    /// Where jobs are published: the job exchange, or `None` for the
    /// default exchange.
    pub(crate) fn job_route(&self) -> Option<lapin::types::ShortString> {
        self.job_exchange.as_deref().map(crate::properties::short)
    }

    /// The suspect-queue suffix and the limit when the poison guard is on.
    pub(crate) fn guard_in_use(&self) -> Option<(&str, u32)> {
        self.poison_guard
            .map(|limit| (self.suspect_suffix.as_str(), limit))
    }

    /// The suspect-queue suffix when the poison guard is on.
    pub(crate) fn suspect_suffix_in_use(&self) -> Option<&str> {
        self.guard_in_use().map(|(suffix, _)| suffix)
    }

    /// The dead-letter suffix when dead-letter queues are on.
    pub(crate) fn dead_suffix_in_use(&self) -> Option<&str> {
        self.declare_dead_letter_queues
            .then_some(self.dead_suffix.as_str())
    }
}
