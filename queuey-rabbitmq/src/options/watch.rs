//! The builder methods and read-back of the [hold
//! watchdog](crate#hold-watchdog)'s settings: whether it runs, where the
//! management API is, how often it is read and how long a quorum hold may
//! keep expired jobs without releasing any before it is reported.

use std::time::Duration;

use queuey_core::Error;
use queuey_core::uri::redact;

use super::RabbitMqOptions;
use super::settings::RabbitMqSettings;
#[cfg(test)]
use super::watch_settings::{DEFAULT_HOLD_STALL_AFTER, DEFAULT_HOLD_WATCH_INTERVAL};

impl RabbitMqOptions {
    /// Whether the backend runs its [hold watchdog](crate#hold-watchdog)
    /// (default `true`): a task that reads the management API every
    /// [`hold_watch_interval`](Self::hold_watch_interval) and reports the
    /// quorum holds of this backend's queues that stopped releasing their
    /// jobs. It needs the `hold-watch` cargo feature (on by default) and
    /// the broker's `rabbitmq_management` plugin; without either it does
    /// nothing, and nothing else changes.
    pub fn hold_watch(mut self, watch: bool) -> Self {
        self.hold_watch.enabled = watch;
        self
    }

    /// The management API's base URL, for the [hold
    /// watchdog](crate#hold-watchdog): `http://host:port` or
    /// `https://host:port`, with a path when the API is served under one
    /// (`https://host/rabbitmq`), and with `user:password@` when the API
    /// is to be read as another user than the AMQP one.
    ///
    /// By default it is derived from the first AMQP address: the same
    /// host, `http://HOST:15672` for `amqp://` and `https://HOST:15671`
    /// for `amqps://` (RabbitMQ's default management ports), the AMQP
    /// user and password, and the AMQP virtual host. The password never
    /// appears in logs or `Debug` output.
    pub fn management_url(mut self, url: impl Into<String>) -> Self {
        self.hold_watch.management_url = Some(url.into());
        self
    }

    /// How often the [hold watchdog](crate#hold-watchdog) reads the
    /// management API (default
    /// [`DEFAULT_HOLD_WATCH_INTERVAL`](crate::options::DEFAULT_HOLD_WATCH_INTERVAL), 30 s): one
    /// request listing the virtual host's queues per read.
    pub fn hold_watch_interval(mut self, interval: Duration) -> Self {
        self.hold_watch.interval = interval;
        self
    }

    /// How long a quorum hold may hold jobs whose delay is over without
    /// releasing any before the [hold watchdog](crate#hold-watchdog)
    /// reports it as stalled (default
    /// [`DEFAULT_HOLD_STALL_AFTER`](crate::options::DEFAULT_HOLD_STALL_AFTER), 60 s).
    /// Shorter reports sooner; a window of a few reads keeps the
    /// management API's statistics, which lag by up to 5 s, from raising
    /// a false alarm.
    pub fn hold_stall_after(mut self, window: Duration) -> Self {
        self.hold_watch.stall_after = window;
        self
    }

    /// The checks on the watchdog's settings; the URL is quoted without
    /// its password.
    pub(super) fn validate_hold_watch(&self) -> Result<(), Error> {
        let watch = &self.hold_watch;
        if watch.interval.is_zero() {
            return Err(Error::invalid_config(
                "hold_watch_interval must be longer than zero",
            ));
        }
        if watch.stall_after.is_zero() {
            return Err(Error::invalid_config(
                "hold_stall_after must be longer than zero",
            ));
        }
        if let Some(url) = &watch.management_url {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            let host = rest
                .map(|r| r.split(['/', '?', '#']).next().unwrap_or_default())
                .map(|authority| authority.rsplit('@').next().unwrap_or_default());
            if host.is_none_or(str::is_empty) {
                return Err(Error::invalid_config(format!(
                    "management_url `{}` must be an http:// or https:// URL with a host",
                    redact(url)
                )));
            }
        }
        Ok(())
    }
}

impl<'a> RabbitMqSettings<'a> {
    /// Whether the hold watchdog runs ([`RabbitMqOptions::hold_watch`]).
    pub fn hold_watch(&self) -> bool {
        self.options.hold_watch.enabled
    }

    /// The management API's base URL as given, `None` when it is derived
    /// from the first AMQP address ([`RabbitMqOptions::management_url`]).
    /// It may hold a password: never log it as it is.
    pub fn management_url(&self) -> Option<&'a str> {
        self.options.hold_watch.management_url.as_deref()
    }

    /// How often the hold watchdog reads the management API
    /// ([`RabbitMqOptions::hold_watch_interval`]).
    pub fn hold_watch_interval(&self) -> Duration {
        self.options.hold_watch.interval
    }

    /// How long a hold may keep expired jobs without releasing any before
    /// it is reported ([`RabbitMqOptions::hold_stall_after`]).
    pub fn hold_stall_after(&self) -> Duration {
        self.options.hold_watch.stall_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_on_by_default_with_its_documented_pace() {
        let options = RabbitMqOptions::default();
        let s = options.settings();
        assert!(s.hold_watch());
        assert_eq!(s.management_url(), None);
        assert_eq!(s.hold_watch_interval(), DEFAULT_HOLD_WATCH_INTERVAL);
        assert_eq!(s.hold_stall_after(), DEFAULT_HOLD_STALL_AFTER);
        assert!(DEFAULT_HOLD_WATCH_INTERVAL + DEFAULT_HOLD_STALL_AFTER <= Duration::from_secs(120));
    }

    #[test]
    fn every_watch_setter_reads_back() {
        let options = RabbitMqOptions::default()
            .hold_watch(false)
            .management_url("https://ops:pw@mgmt.internal/rabbitmq")
            .hold_watch_interval(Duration::from_secs(2))
            .hold_stall_after(Duration::from_secs(10));
        let s = options.settings();
        assert!(!s.hold_watch());
        assert_eq!(
            s.management_url(),
            Some("https://ops:pw@mgmt.internal/rabbitmq")
        );
        assert_eq!(s.hold_watch_interval(), Duration::from_secs(2));
        assert_eq!(s.hold_stall_after(), Duration::from_secs(10));
        assert!(options.validate().is_ok());
    }

    #[test]
    fn bad_watch_settings_are_errors_that_hide_the_password() {
        for bad in [
            RabbitMqOptions::default().hold_watch_interval(Duration::ZERO),
            RabbitMqOptions::default().hold_stall_after(Duration::ZERO),
            RabbitMqOptions::default().management_url("ftp://u:SECRETPW@h"),
            RabbitMqOptions::default().management_url("http://"),
            RabbitMqOptions::default().management_url("http://u:SECRETPW@/api"),
            RabbitMqOptions::default().management_url("u:SECRETPW@h:15672"),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
            assert!(!e.to_string().contains("SECRETPW"), "{e}");
        }
    }

    #[test]
    fn debug_output_masks_the_management_password() {
        let options = RabbitMqOptions::default().management_url("http://ops:SECRETPW@h:15672");
        let shown = format!("{options:?} {:?}", options.settings());
        assert!(!shown.contains("SECRETPW"), "{shown}");
        assert!(shown.contains("ops:***@h:15672"), "{shown}");
    }
}
