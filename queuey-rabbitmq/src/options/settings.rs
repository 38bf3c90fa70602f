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
        RabbitMqSettings { options: self }
    }
}

/// Read-backs of settings kept as given: `name -> Type` returns the field
/// of that name, through `.method()` when one follows. Each is documented
/// as what its builder method set: the builder method's doc says what it
/// means.
macro_rules! read_back {
    ($($(#[$attr:meta])* $name:ident -> $ty:ty $(, $how:ident)?;)*) => {
        impl<'a> RabbitMqSettings<'a> {
            $(
                #[doc = concat!("[`RabbitMqOptions::", stringify!($name), "`] as set, else its default.")]
                $(#[$attr])*
                pub fn $name(&self) -> $ty {
                    self.options.$name$(.$how())?
                }
            )*
        }
    };
}
#[cfg(feature = "fleet")]
pub(super) use read_back;

read_back! {
    heartbeat -> Duration;
    connect_timeout -> Duration;
    connect_wait -> Duration;
    call_timeout -> Duration;
    publish_timeout -> Duration;
    reconnect_delay -> (Duration, Duration);
    refuse_long_delays -> bool;
    reconnect_deadline -> Option<Duration>;
    prune_holds_after -> Option<Duration>;
    consumer_timeout -> Option<Duration>;
    connection_name -> Option<&'a str>, as_deref;
    locale -> Option<&'a str>, as_deref;
    dead_suffix -> &'a str, as_str;
    declare_dead_letter_queues -> bool;
    deferred_suffix -> &'a str, as_str;
    suspect_suffix -> &'a str, as_str;
    poison_guard -> Option<u32>;
    hold_queues -> HoldQueues;
    publish_concurrency -> usize;
    publish_window -> usize;
    max_message_size -> usize;
    worker_senders -> &'a [String], as_slice;
    authenticated_user -> Option<&'a str>, as_deref;
    job_exchange -> Option<&'a str>, as_deref;
}

impl<'a> RabbitMqSettings<'a> {
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

    /// How `amqps://` addresses are secured ([`RabbitMqOptions::tls`]).
    pub fn tls(&self) -> &'a TlsOptions {
        &self.options.tls
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
