//! The read-only view of a [`RabbitMqOptions`]'s settings.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use queuey_core::backend::Granularity;

use super::RabbitMqOptions;
use crate::topology::HoldQueues;
use crate::{ConnectionProperties, TlsOptions};

/// What was set on a [`RabbitMqOptions`], read back under the builder
/// methods' own names: [`RabbitMqOptions::heartbeat`] sets it,
/// `settings().heartbeat()` reads it. Get one with
/// [`RabbitMqOptions::settings`].
///
/// ```
/// use std::time::Duration;
/// use queuey_rabbitmq::RabbitMqOptions;
/// use queuey_rabbitmq::options::DEFAULT_HEARTBEAT;
///
/// let options = RabbitMqOptions::default()
///     .connection_name("billing-worker")
///     .dead_suffix("-dlq");
/// let settings = options.settings();
/// assert_eq!(settings.connection_name(), Some("billing-worker"));
/// assert_eq!(settings.dead_suffix(), "-dlq");
/// assert_eq!(settings.heartbeat(), DEFAULT_HEARTBEAT);
/// assert_eq!(settings.deferred_granularity(), queuey_rabbitmq::options::DEFAULT_QUORUM_GRANULARITY);
/// ```
#[derive(Clone, Copy)]
pub struct RabbitMqSettings<'a> {
    pub(super) options: &'a RabbitMqOptions,
}

impl RabbitMqOptions {
    /// What was set, read back under the builder methods' names:
    /// `settings().heartbeat()`, `settings().dead_suffix()`, ...
    pub fn settings(&self) -> RabbitMqSettings<'_> {
        RabbitMqSettings::new(self)
    }
}

impl<'a> RabbitMqSettings<'a> {
    pub(crate) fn new(options: &'a RabbitMqOptions) -> Self {
        RabbitMqSettings { options }
    }

    /// The heartbeat interval asked of the broker
    /// ([`RabbitMqOptions::heartbeat`]).
    pub fn heartbeat(&self) -> Duration {
        self.options.heartbeat
    }

    /// The bound on opening one connection
    /// ([`RabbitMqOptions::connect_timeout`]).
    pub fn connect_timeout(&self) -> Duration {
        self.options.connect_timeout
    }

    /// How long the first connection waits for a broker it cannot reach
    /// yet ([`RabbitMqOptions::connect_wait`]).
    pub fn connect_wait(&self) -> Duration {
        self.options.connect_wait
    }

    /// The bound on a broker call other than a publish
    /// ([`RabbitMqOptions::call_timeout`]).
    pub fn call_timeout(&self) -> Duration {
        self.options.call_timeout
    }

    /// The bound on one publish ([`RabbitMqOptions::publish_timeout`]).
    pub fn publish_timeout(&self) -> Duration {
        self.options.publish_timeout
    }

    /// The first and the longest pause between reconnection attempts
    /// ([`RabbitMqOptions::reconnect_delay`]).
    pub fn reconnect_delay(&self) -> (Duration, Duration) {
        self.options.reconnect_delay
    }

    /// Whether delays longer than one hold are refused
    /// ([`RabbitMqOptions::refuse_long_delays`]).
    pub fn refuse_long_delays(&self) -> bool {
        self.options.refuse_long_delays
    }

    /// How long reconnecting goes on before the backend gives up, `None`
    /// for ever ([`RabbitMqOptions::reconnect_deadline`]).
    pub fn reconnect_deadline(&self) -> Option<Duration> {
        self.options.reconnect_deadline
    }

    /// How long a quorum hold this backend used may go unused before the
    /// backend deletes it, `None` for never
    /// ([`RabbitMqOptions::prune_holds_after`]).
    pub fn prune_holds_after(&self) -> Option<Duration> {
        self.options.prune_holds_after
    }

    /// The broker's consumer timeout as given, `None` when it does not
    /// apply ([`RabbitMqOptions::consumer_timeout`]).
    pub fn consumer_timeout(&self) -> Option<Duration> {
        self.options.consumer_timeout
    }

    /// The connection's name, if set ([`RabbitMqOptions::connection_name`]).
    pub fn connection_name(&self) -> Option<&'a str> {
        self.options.connection_name.as_deref()
    }

    /// The connection's name, client properties and locale together
    /// ([`RabbitMqOptions::connection_properties`]).
    pub fn connection_properties(&self) -> ConnectionProperties {
        ConnectionProperties {
            connection_name: self.options.connection_name.clone(),
            client_properties: self.options.client_properties.clone(),
            locale: self.options.locale.clone(),
        }
    }

    /// The value of one client property, if set
    /// ([`RabbitMqOptions::client_property`]).
    pub fn client_property(&self, key: &str) -> Option<&'a str> {
        self.options.client_properties.get(key).map(String::as_str)
    }

    /// Every client property set with [`RabbitMqOptions::client_property`]
    /// (or [`connection_properties`](RabbitMqOptions::connection_properties)).
    pub fn client_properties(&self) -> &'a BTreeMap<String, String> {
        &self.options.client_properties
    }

    /// The AMQP locale, if set ([`RabbitMqOptions::locale`]).
    pub fn locale(&self) -> Option<&'a str> {
        self.options.locale.as_deref()
    }

    /// The dead-letter queue's suffix ([`RabbitMqOptions::dead_suffix`]).
    pub fn dead_suffix(&self) -> &'a str {
        &self.options.dead_suffix
    }

    /// Whether dead-letter queues are declared and used
    /// ([`RabbitMqOptions::declare_dead_letter_queues`]).
    pub fn declare_dead_letter_queues(&self) -> bool {
        self.options.declare_dead_letter_queues
    }

    /// The suffix in hold-queue names ([`RabbitMqOptions::deferred_suffix`]).
    pub fn deferred_suffix(&self) -> &'a str {
        &self.options.deferred_suffix
    }

    /// The suffix of the suspect queue's name
    /// ([`RabbitMqOptions::suspect_suffix`]).
    pub fn suspect_suffix(&self) -> &'a str {
        &self.options.suspect_suffix
    }

    /// The [poison guard](crate#poison-guard)'s limit, `None` when the guard
    /// is off ([`RabbitMqOptions::poison_guard`]).
    pub fn poison_guard(&self) -> Option<u32> {
        self.options.poison_guard
    }

    /// The rounding of retries and delayed enqueues as configured
    /// ([`RabbitMqOptions::retry_granularity`]; see
    /// [`effective_granularity_ms`](queuey_core::backend::effective_granularity_ms)
    /// for the value used).
    pub fn retry_granularity(&self) -> Granularity {
        self.options
            .retry_granularity
            .unwrap_or(self.options.default_granularity())
    }

    /// The rounding of deferrals as configured
    /// ([`RabbitMqOptions::deferred_granularity`]).
    pub fn deferred_granularity(&self) -> Granularity {
        self.options
            .deferred_granularity
            .unwrap_or(self.options.default_granularity())
    }

    /// The kind of hold queues ([`RabbitMqOptions::hold_queues`]).
    pub fn hold_queues(&self) -> HoldQueues {
        self.options.hold_queues
    }

    /// How `amqps://` addresses are secured ([`RabbitMqOptions::tls`]).
    pub fn tls(&self) -> &'a TlsOptions {
        &self.options.tls
    }

    /// The number of publishing channels
    /// ([`RabbitMqOptions::publish_concurrency`]).
    pub fn publish_concurrency(&self) -> usize {
        self.options.publish_concurrency
    }

    /// The publishes in flight on one publishing channel
    /// ([`RabbitMqOptions::publish_window`]).
    pub fn publish_window(&self) -> usize {
        self.options.publish_window
    }

    /// The largest body published, in bytes
    /// ([`RabbitMqOptions::max_message_size`]).
    pub fn max_message_size(&self) -> usize {
        self.options.max_message_size
    }

    /// The users besides this backend's own whose heartbeats, schedule
    /// states and results it accepts ([`RabbitMqOptions::worker_senders`]).
    pub fn worker_senders(&self) -> &'a [String] {
        &self.options.worker_senders
    }

    /// The user a certificate login is
    /// ([`RabbitMqOptions::authenticated_user`]).
    pub fn authenticated_user(&self) -> Option<&'a str> {
        self.options.authenticated_user.as_deref()
    }

    /// The exchange jobs are published through, if not the default one
    /// ([`RabbitMqOptions::job_exchange`]).
    pub fn job_exchange(&self) -> Option<&'a str> {
        self.options.job_exchange.as_deref()
    }
}

impl fmt::Debug for RabbitMqSettings<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RabbitMqSettings")
            .field(self.options)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{
        DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_CONNECT_WAIT, DEFAULT_HEARTBEAT,
        DEFAULT_PUBLISH_CONCURRENCY, DEFAULT_PUBLISH_TIMEOUT, DEFAULT_PUBLISH_WINDOW,
        DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN,
    };

    #[test]
    fn defaults_read_back() {
        let o = RabbitMqOptions::default();
        let s = o.settings();
        assert_eq!(s.heartbeat(), DEFAULT_HEARTBEAT);
        assert_eq!(s.connect_timeout(), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(s.connect_wait(), DEFAULT_CONNECT_WAIT);
        assert_eq!(s.call_timeout(), DEFAULT_CALL_TIMEOUT);
        assert_eq!(s.publish_timeout(), DEFAULT_PUBLISH_TIMEOUT);
        assert_eq!(
            s.reconnect_delay(),
            (DEFAULT_RECONNECT_DELAY_MIN, DEFAULT_RECONNECT_DELAY_MAX)
        );
        assert!(!s.refuse_long_delays());
        assert_eq!(s.reconnect_deadline(), None);
        assert_eq!(
            s.consumer_timeout(),
            Some(crate::options::DEFAULT_CONSUMER_TIMEOUT)
        );
        assert_eq!(s.connection_name(), None);
        assert_eq!(s.connection_properties(), ConnectionProperties::default());
        assert!(s.client_properties().is_empty());
        assert_eq!(s.locale(), None);
        assert_eq!(s.dead_suffix(), ".dead");
        assert!(s.declare_dead_letter_queues());
        assert_eq!(s.deferred_suffix(), ".deferred");
        assert_eq!(s.suspect_suffix(), ".suspect");
        assert_eq!(
            s.poison_guard(),
            Some(crate::options::DEFAULT_POISON_GUARD_LIMIT)
        );
        assert_eq!(
            s.retry_granularity(),
            crate::options::DEFAULT_QUORUM_GRANULARITY
        );
        assert_eq!(
            s.deferred_granularity(),
            crate::options::DEFAULT_QUORUM_GRANULARITY
        );
        assert_eq!(s.hold_queues(), HoldQueues::Quorum);
        assert_eq!(s.publish_concurrency(), DEFAULT_PUBLISH_CONCURRENCY);
        assert_eq!(s.publish_window(), DEFAULT_PUBLISH_WINDOW);
        assert_eq!(s.max_message_size(), 16 * 1024 * 1024);
        #[cfg(feature = "fleet")]
        assert_eq!(s.control_stream(), crate::topology::CONTROL_STREAM);
    }

    #[test]
    fn every_setter_reads_back_under_its_own_name() {
        let second = Duration::from_secs(1);
        let o = RabbitMqOptions::default()
            .heartbeat(second * 3)
            .connect_timeout(second * 4)
            .connect_wait(second * 9)
            .call_timeout(second * 5)
            .publish_timeout(second * 6)
            .reconnect_delay(second, second * 7)
            .refuse_long_delays(true)
            .reconnect_deadline(Some(second * 8))
            .consumer_timeout(None)
            .connection_name("n")
            .client_property("k", "v")
            .locale("de_DE")
            .dead_suffix("-dlq")
            .declare_dead_letter_queues(false)
            .deferred_suffix(".wait")
            .suspect_suffix("-suspects")
            .poison_guard(Some(2))
            .retry_granularity(second * 10)
            .deferred_granularity(Duration::ZERO)
            .hold_queues(HoldQueues::Classic)
            .publish_concurrency(1)
            .publish_window(2)
            .max_message_size(1024);
        #[cfg(feature = "fleet")]
        let o = o.control_stream("c");
        let s = o.settings();
        assert_eq!(s.heartbeat(), second * 3);
        assert_eq!(s.connect_timeout(), second * 4);
        assert_eq!(s.connect_wait(), second * 9);
        assert_eq!(s.call_timeout(), second * 5);
        assert_eq!(s.publish_timeout(), second * 6);
        assert_eq!(s.reconnect_delay(), (second, second * 7));
        assert!(s.refuse_long_delays());
        assert_eq!(s.reconnect_deadline(), Some(second * 8));
        assert_eq!(s.consumer_timeout(), None);
        assert_eq!(s.connection_name(), Some("n"));
        assert_eq!(s.client_property("k"), Some("v"));
        assert_eq!(s.client_property("other"), None);
        assert_eq!(s.client_properties().len(), 1);
        assert_eq!(s.locale(), Some("de_DE"));
        assert_eq!(
            s.connection_properties(),
            ConnectionProperties::default()
                .with_connection_name("n")
                .with_client_property("k", "v")
                .with_locale("de_DE")
        );
        assert_eq!(s.dead_suffix(), "-dlq");
        assert!(!s.declare_dead_letter_queues());
        assert_eq!(s.deferred_suffix(), ".wait");
        assert_eq!(s.suspect_suffix(), "-suspects");
        assert_eq!(s.poison_guard(), Some(2));
        assert_eq!(s.retry_granularity(), (second * 10).into());
        assert_eq!(s.deferred_granularity(), Duration::ZERO.into());
        assert_eq!(s.hold_queues(), HoldQueues::Classic);
        assert_eq!(s.publish_concurrency(), 1);
        assert_eq!(s.publish_window(), 2);
        assert_eq!(s.max_message_size(), 1024);
        #[cfg(feature = "fleet")]
        assert_eq!(s.control_stream(), "c");
    }
}
