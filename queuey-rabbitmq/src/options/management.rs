//! Where the backend reads the management API, with the `management`
//! feature: the builder method, its read-back and its check.

use queuey_core::Error;
use queuey_core::uri::redact;

use super::RabbitMqOptions;
use super::management_settings::ManagementUrl;
use super::settings::RabbitMqSettings;
use super::validate::refuse_if;

super::builder::set! {
    /// The management API's base URL, where the backend counts the jobs
    /// of the quorum holds it prunes (see [Pruning hold
    /// queues](crate#pruning-hold-queues)): `http://host:port` or
    /// `https://host:port`, with a path when the API is served under one
    /// (`https://host/rabbitmq`), and with `user:password@` when the API
    /// is to be read as another user than the AMQP one.
    ///
    /// By default it is derived from the first AMQP address: the same
    /// host, `http://HOST:15672` for `amqp://` and `https://HOST:15671`
    /// for `amqps://` (RabbitMQ's default management ports), the AMQP
    /// user and password, and the AMQP virtual host (see
    /// [`management::Endpoint`](crate::management::Endpoint)). The password
    /// never appears in logs or `Debug` output.
    management_url(url: impl Into<String>) = ManagementUrl(Some(url.into()));
}

impl RabbitMqOptions {
    /// The check on the management URL; the URL is quoted without its
    /// password.
    pub(super) fn validate_management(&self) -> Result<(), Error> {
        let Some(url) = &self.management_url.0 else {
            return Ok(());
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        let host = rest
            .map(|r| r.split(['/', '?', '#']).next().unwrap_or_default())
            .map(|authority| authority.rsplit('@').next().unwrap_or_default());
        refuse_if!(
            host.is_none_or(str::is_empty),
            "management_url `{}` must be an http:// or https:// URL with a host",
            redact(url)
        );
        Ok(())
    }
}

impl<'a> RabbitMqSettings<'a> {
    /// The management API's base URL as given, `None` when it is derived
    /// from the first AMQP address ([`RabbitMqOptions::management_url`]).
    /// It may hold a password: never log it as it is.
    pub fn management_url(&self) -> Option<&'a str> {
        self.options.management_url.0.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_management_url_reads_back_and_is_derived_by_default() {
        assert_eq!(RabbitMqOptions::default().settings().management_url(), None);
        let options =
            RabbitMqOptions::default().management_url("https://ops:pw@mgmt.internal/rabbitmq");
        assert_eq!(
            options.settings().management_url(),
            Some("https://ops:pw@mgmt.internal/rabbitmq")
        );
        assert!(options.validate().is_ok());
    }

    #[test]
    fn a_bad_management_url_is_an_error_that_hides_the_password() {
        for bad in [
            "ftp://u:SECRETPW@h",
            "http://",
            "http://u:SECRETPW@/api",
            "u:SECRETPW@h:15672",
        ] {
            let e = RabbitMqOptions::default()
                .management_url(bad)
                .validate()
                .unwrap_err();
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
