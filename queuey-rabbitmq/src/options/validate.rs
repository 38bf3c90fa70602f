//! The checks a backend makes on its options when it connects: inconsistent
//! values are refused with [`Error::InvalidConfig`], never a panic.

use queuey_core::Error;

use super::{MAX_PUBLISH_CONCURRENCY, MAX_PUBLISH_WINDOW, RabbitMqOptions};

/// Refuses the options with [`Error::InvalidConfig`] when `cond` holds,
/// saying why with the rest, as `format!` takes it.
macro_rules! refuse_if {
    ($cond:expr, $($why:tt)+) => {
        if $cond {
            return Err(Error::invalid_config(format!($($why)+)));
        }
    };
}
#[cfg(any(feature = "fleet", feature = "management"))]
pub(super) use refuse_if;

impl RabbitMqOptions {
    /// Checks the values that could break the backend.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        refuse_if!(
            self.dead_suffix.is_empty(),
            "dead_suffix must not be empty: the dead-letter queue would be the work queue itself"
        );
        refuse_if!(
            self.poison_guard == Some(0),
            "poison_guard(Some(0)) would dead-letter every job that was ever redelivered: give \
             a limit of at least 1, or None to turn the guard off"
        );
        refuse_if!(
            self.poison_guard.is_some()
                && (self.suspect_suffix.is_empty() || self.suspect_suffix == self.dead_suffix),
            "suspect_suffix `{}` must not be empty or the dead-letter suffix: the suspect queue \
             would be the work queue or its dead-letter queue",
            self.suspect_suffix
        );
        for (name, value, max) in [
            (
                "publish_concurrency",
                self.publish_concurrency,
                MAX_PUBLISH_CONCURRENCY,
            ),
            ("publish_window", self.publish_window, MAX_PUBLISH_WINDOW),
        ] {
            refuse_if!(
                !(1..=max).contains(&value),
                "{name} must be between 1 and {max}, got {value}"
            );
        }
        #[cfg(feature = "fleet")]
        self.validate_fleet()?;
        check_sender_names(self.worker_senders.iter().chain(&self.authenticated_user))?;
        if let Some(exchange) = &self.job_exchange {
            refuse_if!(
                exchange.is_empty() || exchange.len() > 255,
                "job_exchange must be an exchange name of 1 to 255 bytes, got {} bytes",
                exchange.len()
            );
            refuse_if!(
                exchange.starts_with("amq."),
                "job_exchange `{exchange}` starts with `amq.`, which RabbitMQ keeps for its own \
                 exchanges: name it like your queues, e.g. `myapp.jobs`"
            );
        }
        refuse_if!(
            self.max_message_size == 0,
            "max_message_size must be at least 1 byte"
        );
        for (name, value) in [
            ("connect_timeout", self.connect_timeout),
            ("call_timeout", self.call_timeout),
            ("publish_timeout", self.publish_timeout),
        ] {
            refuse_if!(value.is_zero(), "{name} must be longer than zero");
        }
        refuse_if!(
            self.heartbeat.as_secs() > u64::from(u16::MAX),
            "heartbeat is {} s, over the AMQP maximum of {} s",
            self.heartbeat.as_secs(),
            u16::MAX
        );
        refuse_if!(
            self.consumer_timeout == Some(std::time::Duration::ZERO),
            "consumer_timeout(Some(0)) would refuse every worker: give the broker's \
             consumer_timeout, or None when it does not apply"
        );
        refuse_if!(
            self.prune_holds_after == Some(std::time::Duration::ZERO),
            "prune_holds_after(Some(0)) would prune every hold as soon as it is used: give how \
             long a hold may go unused first, or None to keep every hold"
        );
        let (min, max) = self.reconnect_delay;
        refuse_if!(
            min.is_zero() || min > max,
            "reconnect_delay needs 0 < min <= max, got min {min:?} and max {max:?}"
        );
        for key in self.client_properties.keys() {
            refuse_if!(
                key.len() > 255,
                "client property key `{key}` is {} bytes, over the 255-byte AMQP limit",
                key.len()
            );
        }
        if let Some(locale) = &self.locale {
            refuse_if!(
                locale.len() > 255,
                "locale is {} bytes, over the 255-byte AMQP limit",
                locale.len()
            );
        }
        #[cfg(feature = "management")]
        self.validate_management()?;
        Ok(())
    }
}

/// The check on the RabbitMQ user names of senders: 1 to 255 bytes.
pub(super) fn check_sender_names<'a>(
    users: impl IntoIterator<Item = &'a String>,
) -> Result<(), Error> {
    for user in users {
        refuse_if!(
            user.is_empty() || user.len() > 255,
            "a RabbitMQ user name of a sender must be 1 to 255 bytes, got {} bytes",
            user.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            RabbitMqOptions::default().poison_guard(Some(0)),
            RabbitMqOptions::default().suspect_suffix(""),
            RabbitMqOptions::default().suspect_suffix(".dead"),
            RabbitMqOptions::default().consumer_timeout(Some(std::time::Duration::ZERO)),
            RabbitMqOptions::default().job_exchange(""),
            RabbitMqOptions::default().job_exchange("amq.direct"),
            RabbitMqOptions::default().job_exchange("x".repeat(256)),
            RabbitMqOptions::default().worker_senders([""]),
        ];
        for options in bad {
            let e = options.validate().unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        }
        // A suffix the guard does not use is not checked.
        let off = RabbitMqOptions::default()
            .poison_guard(None)
            .suspect_suffix("");
        assert!(off.validate().is_ok());
    }
}
