//! The settings of the fleet plane, with the `fleet` feature: the builder
//! methods, their read-backs and their checks.

use std::time::Duration;

use queuey_core::Error;

use super::settings::RabbitMqSettings;
use super::validate::refuse_if;
use super::{MAX_CONTROL_SNAPSHOT_INTERVAL, MIN_CONTROL_SNAPSHOT_INTERVAL, RabbitMqOptions};

super::builder::set! {
    /// The stream that carries the fleet's control commands (cancel a job,
    /// pause or resume a queue): default
    /// [`CONTROL_STREAM`](crate::topology::CONTROL_STREAM), `queuey.control`.
    /// Every process that should obey the same commands must use the same
    /// stream; fleets sharing a virtual host can keep their commands apart
    /// with a stream each. The workers' heartbeats go to the stream of the
    /// same name with `.workers` added. See
    /// [Control commands](crate#control-commands). At most 247 bytes, not
    /// empty.
    ///
    /// ```
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// let options = RabbitMqOptions::default().control_stream("billing.control");
    /// assert_eq!(options.settings().control_stream(), "billing.control");
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    control_stream(stream: impl Into<String>) = stream.into();

    /// How often the control state (the paused queues and the live
    /// cancellations) is written to the control stream as a snapshot
    /// (default
    /// [`DEFAULT_CONTROL_SNAPSHOT_INTERVAL`](super::DEFAULT_CONTROL_SNAPSHOT_INTERVAL),
    /// ten minutes; from [`MIN_CONTROL_SNAPSHOT_INTERVAL`] to
    /// [`MAX_CONTROL_SNAPSHOT_INTERVAL`]).
    ///
    /// A process that starts following reads only the stream's last
    /// records (or its last three intervals) and goes on from the first
    /// snapshot among them; without one that recent, it reads the stream
    /// from its start. The followers take turns writing snapshots: about
    /// one per interval for the whole fleet.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// let options = RabbitMqOptions::default().control_snapshot_interval(Duration::from_secs(60));
    /// assert_eq!(options.settings().control_snapshot_interval(), Duration::from_secs(60));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    control_snapshot_interval(interval: Duration) = interval;
}

impl RabbitMqOptions {
    /// RabbitMQ users, besides the one this backend logs in as, whose
    /// control commands this backend obeys. By default none: commands from
    /// any other user are ignored (and counted in
    /// `queuey_rabbitmq_fleet_refused_total`). Give workers the users of
    /// your operators (the `queuey` tool, the dashboard) when those log in
    /// with credentials of their own; see [Who may send
    /// what](crate#who-may-send-what).
    ///
    /// ```
    /// use queuey_rabbitmq::RabbitMqOptions;
    ///
    /// let options = RabbitMqOptions::default().control_senders(["ops"]);
    /// assert_eq!(options.settings().control_senders(), ["ops"]);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    pub fn control_senders<I, S>(mut self, users: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.control_senders = users.into_iter().map(Into::into).collect();
        self
    }

    /// The checks on the fleet's settings: the control stream's name, the
    /// snapshot interval and the command senders' user names.
    pub(super) fn validate_fleet(&self) -> Result<(), Error> {
        let stream = &self.control_stream;
        let most = crate::topology::MAX_CONTROL_STREAM_BYTES;
        refuse_if!(
            stream.is_empty() || stream.len() > most,
            "control_stream must be a queue name of 1 to {most} bytes (its heartbeat stream adds \
             `{}`), got {} bytes",
            crate::topology::HEARTBEAT_STREAM_SUFFIX,
            stream.len()
        );
        let interval = self.control_snapshot_interval;
        refuse_if!(
            !(MIN_CONTROL_SNAPSHOT_INTERVAL..=MAX_CONTROL_SNAPSHOT_INTERVAL).contains(&interval),
            "control_snapshot_interval must be from {MIN_CONTROL_SNAPSHOT_INTERVAL:?} to \
             {MAX_CONTROL_SNAPSHOT_INTERVAL:?}, got {interval:?}"
        );
        super::validate::check_sender_names(&self.control_senders)
    }
}

super::settings::read_back! {
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    control_stream -> &'a str, as_str;
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    control_snapshot_interval -> Duration;
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    control_senders -> &'a [String], as_slice;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::DEFAULT_CONTROL_SNAPSHOT_INTERVAL;

    #[test]
    fn the_fleets_settings_read_back() {
        let defaults = RabbitMqOptions::default();
        let s = defaults.settings();
        assert_eq!(s.control_stream(), crate::topology::CONTROL_STREAM);
        assert_eq!(
            s.control_snapshot_interval(),
            DEFAULT_CONTROL_SNAPSHOT_INTERVAL
        );
        assert!(s.control_senders().is_empty());
        let set = RabbitMqOptions::default()
            .control_stream("c")
            .control_snapshot_interval(Duration::from_secs(60))
            .control_senders(["ops"]);
        let s = set.settings();
        assert_eq!(s.control_stream(), "c");
        assert_eq!(s.control_snapshot_interval(), Duration::from_secs(60));
        assert_eq!(s.control_senders(), ["ops"]);
    }

    #[test]
    fn bad_fleet_values_are_errors_not_panics() {
        let bad = [
            RabbitMqOptions::default().control_stream(""),
            RabbitMqOptions::default().control_stream("c".repeat(248)),
            RabbitMqOptions::default().control_snapshot_interval(Duration::ZERO),
            RabbitMqOptions::default()
                .control_snapshot_interval(Duration::from_secs(2 * 24 * 3600)),
            RabbitMqOptions::default().control_senders([""]),
        ];
        for options in bad {
            let e = options.validate().unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        }
        assert!(
            RabbitMqOptions::default()
                .control_stream("c".repeat(247))
                .validate()
                .is_ok()
        );
    }
}
