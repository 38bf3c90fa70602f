//! Settings of a [`RabbitMqBackend`](crate::RabbitMqBackend).

use std::collections::BTreeMap;
use std::time::Duration;

use queuey_core::backend::Granularity;
use queuey_core::{Error, MAX_MESSAGE_BYTES};

use crate::RabbitMqSettings;
use crate::topology::HoldQueues;

/// The most publishing channels a backend opens.
pub const MAX_PUBLISH_CONCURRENCY: usize = 1024;

/// The default number of publishing channels. Chosen by measurement
/// (`BENCHMARKS.md`): with 128 publishes in flight on each, one channel
/// already matches the best single-channel lapin publisher, and four let
/// the broker work on several channels at once; more gained nothing there.
pub const DEFAULT_PUBLISH_CONCURRENCY: usize = 4;
/// The default number of publishes in flight on one publishing channel.
pub const DEFAULT_PUBLISH_WINDOW: usize = 128;
/// The most publishes in flight on one publishing channel.
pub const MAX_PUBLISH_WINDOW: usize = 65_536;

/// The default granularity of both kinds of hold with classic hold queues:
/// a fixed 1 s step, as the first version had.
pub const DEFAULT_CLASSIC_GRANULARITY: Granularity = Granularity::fixed(Duration::from_secs(1));
/// The default granularity of both kinds of hold with quorum hold queues:
/// whole seconds up to 10 s, then buckets 10 % apart. Quorum hold queues
/// are never deleted, so the granularity bounds how many a work queue ever
/// has: about 150 from 1 s to 24 days, where a 1 s step would allow one per
/// second of delay.
pub const DEFAULT_QUORUM_GRANULARITY: Granularity =
    Granularity::relative(10, Duration::from_secs(1));

/// The default heartbeat interval: a silent peer is noticed within two.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// The default bound on opening one TCP + AMQP connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default bound on one broker call other than a publish: a
/// declaration, an ack or nack, opening a channel, closing.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The default bound on one publish, from the call to the broker's
/// confirmation, including any wait for a reconnection.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// The default first pause between reconnection attempts.
pub const DEFAULT_RECONNECT_DELAY_MIN: Duration = Duration::from_millis(100);
/// The default longest pause between reconnection attempts.
pub const DEFAULT_RECONNECT_DELAY_MAX: Duration = Duration::from_secs(5);

/// Settings of a [`RabbitMqBackend`](crate::RabbitMqBackend).
///
/// Every builder takes and returns `self`. Nothing is checked until the
/// backend connects, which refuses inconsistent values with
/// [`Error::InvalidConfig`] instead of panicking.
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
    pub(crate) retry_granularity: Option<Granularity>,
    pub(crate) deferred_granularity: Option<Granularity>,
    pub(crate) hold_queues: HoldQueues,
    pub(crate) publish_concurrency: usize,
    pub(crate) publish_window: usize,
    pub(crate) max_message_size: usize,
    pub(crate) heartbeat: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) call_timeout: Duration,
    pub(crate) publish_timeout: Duration,
    pub(crate) reconnect_delay: (Duration, Duration),
    pub(crate) reconnect_deadline: Option<Duration>,
    pub(crate) refuse_long_delays: bool,
}

impl Default for RabbitMqOptions {
    /// No connection name, no extra client properties, the client's default
    /// locale, `.dead` and `.deferred` suffixes, dead-letter queues declared,
    /// quorum hold queues with their default granularity
    /// ([`DEFAULT_QUORUM_GRANULARITY`]), 4 publishing channels with up to
    /// 128 publishes in flight on each, and a 16 MiB message limit.
    fn default() -> Self {
        RabbitMqOptions {
            connection_name: None,
            client_properties: BTreeMap::new(),
            locale: None,
            dead_suffix: ".dead".to_owned(),
            declare_dead_letter_queues: true,
            deferred_suffix: ".deferred".to_owned(),
            retry_granularity: None,
            deferred_granularity: None,
            hold_queues: HoldQueues::Quorum,
            publish_concurrency: DEFAULT_PUBLISH_CONCURRENCY,
            publish_window: DEFAULT_PUBLISH_WINDOW,
            max_message_size: MAX_MESSAGE_BYTES,
            heartbeat: DEFAULT_HEARTBEAT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            reconnect_delay: (DEFAULT_RECONNECT_DELAY_MIN, DEFAULT_RECONNECT_DELAY_MAX),
            reconnect_deadline: None,
            refuse_long_delays: false,
        }
    }
}

impl RabbitMqOptions {
    /// The heartbeat interval asked of the broker (default
    /// [`DEFAULT_HEARTBEAT`], 10 s). A connection that hears nothing for two
    /// intervals is declared dead and replaced, so this bounds how long a
    /// silent network partition goes unnoticed. A `heartbeat=` in the URI's
    /// query wins. Zero turns heartbeats off (not recommended).
    pub fn heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// The bound on opening one connection, TCP and AMQP handshake together
    /// (default [`DEFAULT_CONNECT_TIMEOUT`], 10 s). A `connection_timeout=`
    /// in the URI's query wins.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The bound on every broker call other than a publish: declarations,
    /// acks and nacks, opening channels, consuming, closing (default
    /// [`DEFAULT_CALL_TIMEOUT`], 30 s). A call past it fails with
    /// [`BackendErrorKind::TimedOut`](queuey_core::BackendErrorKind::TimedOut).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The bound on one publish (enqueue, hold, dead letter), from the call
    /// to the broker's confirmation, including any wait for a reconnection
    /// (default [`DEFAULT_PUBLISH_TIMEOUT`], 30 s). Past it the publish fails
    /// with [`BackendErrorKind::TimedOut`](queuey_core::BackendErrorKind::TimedOut):
    /// the broker may still have taken the message, so publishing it again
    /// (same job id) is the safe answer.
    pub fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.publish_timeout = timeout;
        self
    }

    /// The pauses between reconnection attempts: the first is `min`, each
    /// next one doubles up to `max`, each with full jitter (defaults
    /// 100 ms and 5 s).
    pub fn reconnect_delay(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_delay = (min, max);
        self
    }

    /// Refuse delays longer than one hold queue keeps a job (about 24
    /// days) with [`Error::DelayTooLong`], as the first version did, instead
    /// of holding them in legs of 24 days (the default; see
    /// [`rehold`](crate::rehold)). Holding in legs needs every consumer of
    /// the queue to be a version that checks due times.
    pub fn refuse_long_delays(mut self, refuse: bool) -> Self {
        self.refuse_long_delays = refuse;
        self
    }

    /// How long the backend keeps trying to reconnect before it gives up
    /// for good (its calls then fail and workers stop). `None`, the
    /// default, keeps trying for as long as the process runs.
    pub fn reconnect_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.reconnect_deadline = deadline;
        self
    }

    /// The name the connection shows on the broker (management UI,
    /// `rabbitmqctl list_connections client_properties`). Unset by default.
    pub fn connection_name(mut self, name: impl Into<String>) -> Self {
        self.connection_name = Some(name.into());
        self
    }

    /// Sets the connection's name, client properties and locale at once,
    /// replacing any set before (the seeds' `connection_properties` option,
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

    /// The AMQP locale sent when connecting (default: the client's, `en_US`).
    pub fn locale(mut self, locale: impl Into<String>) -> Self {
        self.locale = Some(locale.into());
        self
    }

    /// Suffix of the dead-letter queue's name (default `.dead`); must not be
    /// empty.
    pub fn dead_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.dead_suffix = suffix.into();
        self
    }

    /// Whether `declare` creates `q{dead_suffix}` and dead letters are
    /// published there (default `true`).
    ///
    /// When `false`, a dead-lettered delivery is rejected without requeue,
    /// so whatever dead-letter policy the broker has for the queue applies
    /// (without one, the broker drops it); each such rejection is logged.
    pub fn declare_dead_letter_queues(mut self, declare: bool) -> Self {
        self.declare_dead_letter_queues = declare;
        self
    }

    /// Suffix in hold-queue names, before the `.{ttl_ms}` (default
    /// `.deferred`; quorum hold queues add `.quorum` after it).
    pub fn deferred_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.deferred_suffix = suffix.into();
        self
    }

    /// Rounding for retry backoffs and delayed enqueues: a step
    /// (`Duration`) or any [`Granularity`]. The default depends on the hold
    /// queues: [`DEFAULT_QUORUM_GRANULARITY`] (10 % buckets) with quorum
    /// holds, [`DEFAULT_CLASSIC_GRANULARITY`] (1 s) with classic ones.
    ///
    /// Delays are rounded up to a multiple of a step, so each value bounds
    /// how many hold queues a failing queue can have: with backoff capped at
    /// five minutes, 1 s allows up to 300, 10 s up to 30. Zero or
    /// sub-millisecond steps count as 1 ms.
    /// [`Granularity::relative`] rounds into buckets that grow by a
    /// percentage instead: lateness stays within that percentage and the
    /// number of hold queues grows with the logarithm of the longest delay
    /// (122 buckets from 1 s to a week at 10 %).
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
    pub fn retry_granularity(mut self, granularity: impl Into<Granularity>) -> Self {
        self.retry_granularity = Some(granularity.into());
        self
    }

    /// Rounding for deferrals: a step (`Duration`) or any [`Granularity`],
    /// with the same default as
    /// [`retry_granularity`](Self::retry_granularity). Zero or
    /// sub-millisecond steps count as 1 ms.
    pub fn deferred_granularity(mut self, granularity: impl Into<Granularity>) -> Self {
        self.deferred_granularity = Some(granularity.into());
        self
    }

    /// Which hold queues park retried, deferred and delayed jobs (default
    /// [`HoldQueues::Quorum`]).
    ///
    /// Quorum hold queues keep every job through a broker crash; classic
    /// ones, the first version's, can lose the jobs that were moving back to
    /// their work queue when the broker died (see [`HoldQueues`]), and
    /// cannot serve a quorum work queue.
    ///
    /// Quorum hold queues are never deleted (no lease can keep a quorum
    /// queue alive from the producing side), so each distinct rounded delay
    /// is a queue that stays on the broker: about 130 KB of broker memory
    /// each. With the default granularity a work queue needs at most about
    /// 150 of them; a fixed granularity set explicitly bounds them by
    /// `longest delay / step` instead. `queuey holds` lists them, and an
    /// operator may delete an empty one at any time: the next hold declares
    /// it again.
    ///
    /// ```
    /// use queuey_rabbitmq::{HoldQueues, RabbitMqOptions};
    ///
    /// // The seeds' holds, exactly: classic queues, 1 s steps.
    /// let options = RabbitMqOptions::default().hold_queues(HoldQueues::Classic);
    /// # let _ = options;
    /// ```
    pub fn hold_queues(mut self, holds: HoldQueues) -> Self {
        self.hold_queues = holds;
        self
    }

    /// How many publishing channels the backend keeps (default
    /// [`DEFAULT_PUBLISH_CONCURRENCY`], at most [`MAX_PUBLISH_CONCURRENCY`]).
    ///
    /// Each channel is owned by one task that keeps up to
    /// [`publish_window`](Self::publish_window) publishes in flight on it
    /// and matches every confirmation and returned message to its own
    /// publish. A publish goes to the channel with the fewest publishes
    /// outstanding, so a producer publishing one job at a time keeps to
    /// one channel. Each channel is opened on first use.
    pub fn publish_concurrency(mut self, channels: usize) -> Self {
        self.publish_concurrency = channels;
        self
    }

    /// How many publishes may be in flight (sent, not yet confirmed) on one
    /// publishing channel (default [`DEFAULT_PUBLISH_WINDOW`], at most
    /// [`MAX_PUBLISH_WINDOW`]). A larger window lets the broker confirm
    /// many messages with one acknowledgement; `1` waits for each
    /// confirmation before the channel's next publish.
    pub fn publish_window(mut self, publishes: usize) -> Self {
        self.publish_window = publishes;
        self
    }

    /// The largest message body the backend publishes, in bytes (default
    /// 16 MiB, RabbitMQ 4's own limit). Larger bodies are refused with
    /// [`Error::MessageTooLarge`] before anything is sent.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// What was set, read back under the builder methods' names:
    /// `settings().heartbeat()`, `settings().dead_suffix()`, ...
    pub fn settings(&self) -> RabbitMqSettings<'_> {
        RabbitMqSettings::new(self)
    }

    /// The connection name, if set.
    #[deprecated(note = "use `.settings().connection_name()`")]
    pub fn get_connection_name(&self) -> Option<&str> {
        self.settings().connection_name()
    }

    /// The extra client properties.
    #[deprecated(note = "use `.settings().client_properties()`")]
    pub fn get_client_properties(&self) -> &BTreeMap<String, String> {
        self.settings().client_properties()
    }

    /// The locale, if set.
    #[deprecated(note = "use `.settings().locale()`")]
    pub fn get_locale(&self) -> Option<&str> {
        self.settings().locale()
    }

    /// The dead-letter queue suffix.
    #[deprecated(note = "use `.settings().dead_suffix()`")]
    pub fn get_dead_suffix(&self) -> &str {
        self.settings().dead_suffix()
    }

    /// Whether dead-letter queues are declared and used.
    #[deprecated(note = "use `.settings().declare_dead_letter_queues()`")]
    pub fn get_declare_dead_letter_queues(&self) -> bool {
        self.settings().declare_dead_letter_queues()
    }

    /// The hold-queue suffix.
    #[deprecated(note = "use `.settings().deferred_suffix()`")]
    pub fn get_deferred_suffix(&self) -> &str {
        self.settings().deferred_suffix()
    }

    /// The retry granularity: as configured, else the default of the hold
    /// queues in use (see
    /// [`effective_granularity_ms`](crate::topology::effective_granularity_ms)
    /// for the value used).
    #[deprecated(note = "use `.settings().retry_granularity()`")]
    pub fn get_retry_granularity(&self) -> Granularity {
        self.settings().retry_granularity()
    }

    /// The deferral granularity as configured.
    #[deprecated(note = "use `.settings().deferred_granularity()`")]
    pub fn get_deferred_granularity(&self) -> Granularity {
        self.settings().deferred_granularity()
    }

    /// The granularity of both kinds of hold when none is set: the default
    /// of the hold queues in use.
    pub(crate) fn default_granularity(&self) -> Granularity {
        match self.hold_queues {
            HoldQueues::Classic => DEFAULT_CLASSIC_GRANULARITY,
            _ => DEFAULT_QUORUM_GRANULARITY,
        }
    }

    /// The number of publishing channels.
    #[deprecated(note = "use `.settings().publish_concurrency()`")]
    pub fn get_publish_concurrency(&self) -> usize {
        self.settings().publish_concurrency()
    }

    /// The largest body published, in bytes.
    #[deprecated(note = "use `.settings().max_message_size()`")]
    pub fn get_max_message_size(&self) -> usize {
        self.settings().max_message_size()
    }

    /// Checks the values that could break the backend.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.dead_suffix.is_empty() {
            return Err(Error::invalid_config(
                "dead_suffix must not be empty: the dead-letter queue would be the work queue itself",
            ));
        }
        if !(1..=MAX_PUBLISH_CONCURRENCY).contains(&self.publish_concurrency) {
            return Err(Error::invalid_config(format!(
                "publish_concurrency must be between 1 and {MAX_PUBLISH_CONCURRENCY}, got {}",
                self.publish_concurrency
            )));
        }
        if !(1..=MAX_PUBLISH_WINDOW).contains(&self.publish_window) {
            return Err(Error::invalid_config(format!(
                "publish_window must be between 1 and {MAX_PUBLISH_WINDOW}, got {}",
                self.publish_window
            )));
        }
        if self.max_message_size == 0 {
            return Err(Error::invalid_config(
                "max_message_size must be at least 1 byte",
            ));
        }
        for (name, value) in [
            ("connect_timeout", self.connect_timeout),
            ("call_timeout", self.call_timeout),
            ("publish_timeout", self.publish_timeout),
        ] {
            if value.is_zero() {
                return Err(Error::invalid_config(format!(
                    "{name} must be longer than zero"
                )));
            }
        }
        if self.heartbeat.as_secs() > u64::from(u16::MAX) {
            return Err(Error::invalid_config(format!(
                "heartbeat is {} s, over the AMQP maximum of {} s",
                self.heartbeat.as_secs(),
                u16::MAX
            )));
        }
        let (min, max) = self.reconnect_delay;
        if min.is_zero() || min > max {
            return Err(Error::invalid_config(format!(
                "reconnect_delay needs 0 < min <= max, got min {min:?} and max {max:?}"
            )));
        }
        for key in self.client_properties.keys() {
            if key.len() > 255 {
                return Err(Error::invalid_config(format!(
                    "client property key `{key}` is {} bytes, over the 255-byte AMQP limit",
                    key.len()
                )));
            }
        }
        if let Some(locale) = &self.locale
            && locale.len() > 255
        {
            return Err(Error::invalid_config(format!(
                "locale is {} bytes, over the 255-byte AMQP limit",
                locale.len()
            )));
        }
        Ok(())
    }

    /// The dead-letter suffix when dead-letter queues are on.
    pub(crate) fn dead_suffix_in_use(&self) -> Option<&str> {
        self.declare_dead_letter_queues
            .then_some(self.dead_suffix.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let o = RabbitMqOptions::default();
        assert_eq!(o.settings().connection_name(), None);
        assert!(o.settings().client_properties().is_empty());
        assert_eq!(o.settings().locale(), None);
        assert_eq!(o.settings().dead_suffix(), ".dead");
        assert!(o.settings().declare_dead_letter_queues());
        assert_eq!(o.settings().deferred_suffix(), ".deferred");
        assert_eq!(o.settings().hold_queues(), HoldQueues::Quorum);
        assert_eq!(o.settings().retry_granularity(), DEFAULT_QUORUM_GRANULARITY);
        assert_eq!(
            o.settings().deferred_granularity(),
            DEFAULT_QUORUM_GRANULARITY
        );
        assert_eq!(
            o.settings().publish_concurrency(),
            DEFAULT_PUBLISH_CONCURRENCY
        );
        assert_eq!(o.publish_window, DEFAULT_PUBLISH_WINDOW);
        assert_eq!(o.settings().max_message_size(), 16 * 1024 * 1024);
        assert!(o.validate().is_ok());
    }

    #[test]
    fn builders_set_each_value() {
        let o = RabbitMqOptions::default()
            .connection_name("n")
            .client_property("k", "v")
            .locale("de_DE")
            .dead_suffix("-dlq")
            .declare_dead_letter_queues(false)
            .deferred_suffix(".wait")
            .retry_granularity(Duration::from_secs(10))
            .deferred_granularity(Duration::ZERO)
            .publish_concurrency(1)
            .max_message_size(1024);
        assert_eq!(o.settings().connection_name(), Some("n"));
        assert_eq!(
            o.settings()
                .client_properties()
                .get("k")
                .map(String::as_str),
            Some("v")
        );
        assert_eq!(o.settings().locale(), Some("de_DE"));
        assert_eq!(o.settings().dead_suffix(), "-dlq");
        assert!(!o.settings().declare_dead_letter_queues());
        assert_eq!(o.dead_suffix_in_use(), None);
        assert_eq!(o.settings().deferred_suffix(), ".wait");
        assert_eq!(
            o.settings().retry_granularity(),
            Duration::from_secs(10).into()
        );
        assert_eq!(o.settings().deferred_granularity(), Duration::ZERO.into());
        assert_eq!(o.settings().publish_concurrency(), 1);
        assert_eq!(o.settings().max_message_size(), 1024);
        assert!(o.validate().is_ok());
    }

    #[test]
    fn connection_properties_set_name_properties_and_locale_at_once() {
        let o = RabbitMqOptions::default()
            .client_property("old", "gone")
            .connection_properties(
                crate::ConnectionProperties::default()
                    .with_connection_name("n")
                    .with_client_property("k", "v")
                    .with_locale("de_DE"),
            );
        assert_eq!(o.settings().connection_name(), Some("n"));
        assert_eq!(o.settings().client_properties().len(), 1);
        assert_eq!(
            o.settings()
                .client_properties()
                .get("k")
                .map(String::as_str),
            Some("v")
        );
        assert_eq!(o.settings().locale(), Some("de_DE"));
        let long = RabbitMqOptions::default().connection_properties(
            crate::ConnectionProperties::default().with_client_property("k".repeat(256), "v"),
        );
        assert!(matches!(long.validate(), Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        let bad = [
            RabbitMqOptions::default().dead_suffix(""),
            RabbitMqOptions::default().publish_concurrency(0),
            RabbitMqOptions::default().publish_concurrency(MAX_PUBLISH_CONCURRENCY + 1),
            RabbitMqOptions::default().max_message_size(0),
            RabbitMqOptions::default().publish_window(0),
            RabbitMqOptions::default().publish_window(MAX_PUBLISH_WINDOW + 1),
            RabbitMqOptions::default().client_property("k".repeat(256), "v"),
            RabbitMqOptions::default().locale("x".repeat(256)),
        ];
        for options in bad {
            let e = options.validate().unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        }
    }

    #[test]
    fn the_default_granularity_follows_the_hold_queues_and_a_set_one_wins() {
        let classic = RabbitMqOptions::default().hold_queues(HoldQueues::Classic);
        assert_eq!(
            classic.settings().retry_granularity(),
            Duration::from_secs(1).into()
        );
        assert_eq!(
            classic.settings().deferred_granularity(),
            Duration::from_secs(1).into()
        );
        let set = RabbitMqOptions::default()
            .retry_granularity(Duration::from_secs(5))
            .hold_queues(HoldQueues::Classic)
            .hold_queues(HoldQueues::Quorum);
        assert_eq!(
            set.settings().retry_granularity(),
            Duration::from_secs(5).into()
        );
        assert_eq!(
            set.settings().deferred_granularity(),
            DEFAULT_QUORUM_GRANULARITY
        );
    }
}
