//! A broker address: the URI as given, checked and completed from the
//! options, and its form with the password masked.

use std::time::Duration;

use lapin::uri::{AMQPScheme, AMQPUri, SASLMechanism};
use queuey_core::{Error, uri};

use crate::{RabbitMqOptions, tls};

/// One broker address: the URI to dial and its form with the password
/// masked, the only one ever logged.
pub(crate) struct Address {
    pub(crate) uri: AMQPUri,
    pub(crate) redacted: String,
}

impl Address {
    /// Whether the connection is encrypted.
    pub(crate) fn is_tls(&self) -> bool {
        self.uri.scheme == AMQPScheme::AMQPS
    }
}

/// Parses a URI, adding the options' heartbeat and connect timeout where
/// the URI sets none, and `EXTERNAL` when a client certificate stands in
/// for a password. `amqps://` without a TLS backend is refused here: a TLS
/// address must never be dialled in plaintext.
pub(crate) fn parse(raw: &str, options: &RabbitMqOptions) -> Result<Address, Error> {
    let redacted = uri::redact(raw);
    let mut parsed: AMQPUri = raw.parse().map_err(|e: String| {
        let e = uri::scrub(&e, raw);
        let hint = if e.contains("port") {
            "; a password (or user name) holding `#`, `?`, `/`, `@` or `:` must be \
             percent-encoded, e.g. `#` as `%23`"
        } else {
            ""
        };
        Error::invalid_config(format!("`{redacted}` is not a valid AMQP URI: {e}{hint}"))
    })?;
    if parsed.scheme == AMQPScheme::AMQPS && tls::BACKEND.is_none() {
        return Err(Error::invalid_config(format!(
            "`{redacted}` asks for TLS, but this build has no TLS backend: enable the `rustls` \
             feature of `queuey` or `queuey-rabbitmq` (on by default), or `native-tls`"
        )));
    }
    if parsed.query.heartbeat.is_none() {
        parsed.query.heartbeat = Some(heartbeat_seconds(options.heartbeat));
    }
    if parsed.query.connection_timeout.is_none() {
        let millis = u64::try_from(options.connect_timeout.as_millis()).unwrap_or(u64::MAX);
        parsed.query.connection_timeout = Some(millis);
    }
    if parsed.scheme == AMQPScheme::AMQPS
        && options.tls.identity_given()
        && !uri::has_password(raw)
        && parsed.query.auth_mechanism.is_none()
    {
        parsed.query.auth_mechanism = Some(SASLMechanism::External);
    }
    Ok(Address {
        uri: parsed,
        redacted,
    })
}

/// The heartbeat in the whole seconds AMQP counts in, rounded up: a
/// sub-second interval asks for 1 s rather than 0, which would turn
/// heartbeats off.
fn heartbeat_seconds(interval: Duration) -> u16 {
    let seconds = interval.as_secs() + u64::from(interval.subsec_nanos() > 0);
    u16::try_from(seconds).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(any(feature = "rustls", feature = "rustls-aws-lc", feature = "native-tls"))]
    use crate::TlsOptions;

    const URI: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

    fn heartbeat_asked(interval: Duration) -> Option<u16> {
        let options = RabbitMqOptions::default().heartbeat(interval);
        parse(URI, &options)
            .expect("a valid URI")
            .uri
            .query
            .heartbeat
    }

    #[test]
    fn a_sub_second_heartbeat_is_rounded_up_never_turned_off() {
        assert_eq!(heartbeat_asked(Duration::from_millis(500)), Some(1));
        assert_eq!(heartbeat_asked(Duration::from_millis(1_500)), Some(2));
        assert_eq!(heartbeat_asked(Duration::from_secs(10)), Some(10));
        // Zero is the documented way to turn heartbeats off.
        assert_eq!(heartbeat_asked(Duration::ZERO), Some(0));
        assert_eq!(heartbeat_asked(Duration::from_secs(70_000)), Some(u16::MAX));
    }

    #[test]
    fn a_heartbeat_in_the_uri_wins() {
        let options = RabbitMqOptions::default().heartbeat(Duration::from_secs(10));
        let parsed = parse(&format!("{URI}?heartbeat=3"), &options).expect("a valid URI");
        assert_eq!(parsed.uri.query.heartbeat, Some(3));
    }

    #[cfg(any(feature = "rustls", feature = "rustls-aws-lc", feature = "native-tls"))]
    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    #[cfg(any(feature = "rustls", feature = "rustls-aws-lc", feature = "native-tls"))]
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

    #[cfg(any(feature = "rustls", feature = "rustls-aws-lc", feature = "native-tls"))]
    fn mechanism(raw: &str, options: &RabbitMqOptions) -> Option<SASLMechanism> {
        parse(raw, options)
            .expect("a valid URI")
            .uri
            .query
            .auth_mechanism
    }

    #[cfg(any(feature = "rustls", feature = "rustls-aws-lc", feature = "native-tls"))]
    #[test]
    fn a_client_certificate_without_a_password_authenticates_by_external() {
        let mtls = RabbitMqOptions::default().tls(TlsOptions::default().client_cert_pem(PEM, KEY));
        assert_eq!(
            mechanism("amqps://broker:5671/%2f", &mtls),
            Some(SASLMechanism::External)
        );
        assert_eq!(
            mechanism("amqps://app@broker:5671/%2f", &mtls),
            Some(SASLMechanism::External)
        );
        // A password, an explicit mechanism, plaintext, or no certificate:
        // nothing is changed.
        assert_eq!(mechanism("amqps://app:pw@broker/%2f", &mtls), None);
        assert_eq!(
            mechanism("amqps://broker/%2f?auth_mechanism=amqplain", &mtls),
            Some(SASLMechanism::AMQPlain)
        );
        assert_eq!(mechanism("amqp://broker/%2f", &mtls), None);
        assert_eq!(
            mechanism("amqps://broker/%2f", &RabbitMqOptions::default()),
            None
        );
    }

    #[cfg(not(any(feature = "rustls", feature = "rustls-aws-lc", feature = "native-tls")))]
    #[test]
    fn amqps_without_a_tls_backend_is_refused_before_dialling() {
        let error = parse(
            "amqps://guest:SECRET@127.0.0.1:5671/%2f",
            &RabbitMqOptions::default(),
        )
        .err()
        .expect("refused");
        let text = error.to_string();
        assert!(text.contains("`rustls` feature"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }
}
