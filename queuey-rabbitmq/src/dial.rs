//! Opening one connection to one broker address: parsing the URI, the TCP
//! connection, TLS for `amqps://`, and the AMQP handshake, within the
//! connect bound. Every connection the crate opens goes through [`dial`],
//! the first one and every reconnection alike.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lapin::tcp::AsyncTcpStream;
use lapin::types::LongString;
use lapin::uri::{AMQPScheme, AMQPUri, SASLMechanism};
use lapin::{Connection, ConnectionProperties, ErrorKind};
use queuey_core::{BackendError, BackendErrorKind, Error};

use crate::error::code;
use crate::tls::{self, TlsOptions};
use crate::{RabbitMqOptions, properties, uri};

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

/// Parses a URI, adding the heartbeat and connect timeout from the options
/// where the URI does not set them, and the `EXTERNAL` mechanism when a
/// client certificate stands in for a password.
///
/// `amqps://` in a build without a TLS backend is refused here, before
/// anything is sent: a TLS address must never be dialled in plaintext.
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

/// A failed connection attempt, and whether trying again cannot help.
pub(crate) struct DialFailure {
    pub(crate) error: Error,
    pub(crate) fatal: bool,
}

/// Opens one connection, within the connect bound.
pub(crate) async fn dial(
    address: &Address,
    options: &RabbitMqOptions,
) -> Result<Connection, DialFailure> {
    let redacted = &address.redacted;
    // Read for every connection, so a renewed certificate is used at the
    // next reconnection; the files were checked once when the backend
    // connected, so a failure here is passing (a file being replaced).
    let tls = if address.is_tls() {
        match options.tls.load() {
            Ok(loaded) => Some(loaded),
            Err(error) => {
                return Err(DialFailure {
                    error,
                    fatal: false,
                });
            }
        }
    } else {
        None
    };
    let connecting = open(address, connection_properties(options), tls);
    match tokio::time::timeout(options.connect_timeout, connecting).await {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(e)) => {
            // Refused credentials (403) or virtual host (530) will be refused
            // again: say so rather than retrying for ever.
            let (kind, fatal) = match e.kind() {
                ErrorKind::ProtocolError(amqp)
                    if matches!(amqp.get_id(), 403 | 530 | code::NOT_FOUND) =>
                {
                    (BackendErrorKind::Refused, true)
                }
                ErrorKind::ProtocolError(_) => (BackendErrorKind::Refused, false),
                _ => (BackendErrorKind::ConnectionLost, false),
            };
            let text = address_scrub(&e.to_string(), address);
            let hint = if address.is_tls() {
                tls_hint(&text)
            } else {
                ""
            };
            Err(DialFailure {
                error: Error::Backend(BackendError::new(
                    kind,
                    format!("connecting to RabbitMQ at `{redacted}`: {text}{hint}"),
                )),
                fatal,
            })
        }
        Err(_) => Err(DialFailure {
            error: Error::Backend(BackendError::new(
                BackendErrorKind::TimedOut,
                format!(
                    "connecting to RabbitMQ at `{redacted}`: no answer within {:?}",
                    options.connect_timeout
                ),
            )),
            fatal: false,
        }),
    }
}

/// What to do about the usual TLS failures, from the TLS library's text.
fn tls_hint(text: &str) -> &'static str {
    let lower = text.to_ascii_lowercase();
    if lower.contains("unknownissuer")
        || lower.contains("unknown issuer")
        || lower.contains("self-signed")
        || lower.contains("self signed")
        || lower.contains("unable to get local issuer")
    {
        " (the broker's certificate is not signed by a trusted CA: give the CA with \
         `TlsOptions::ca_file`)"
    } else if lower.contains("notvalidforname")
        || lower.contains("not valid for name")
        || lower.contains("hostname mismatch")
        || lower.contains("name mismatch")
    {
        " (the broker's certificate does not name this host: connect by a name it holds, or \
         set `TlsOptions::server_name`)"
    } else if lower.contains("invalidcontenttype")
        || lower.contains("wrong version number")
        || lower.contains("corrupt message")
    {
        " (the port does not speak TLS: `amqps://` needs the broker's TLS listener, port 5671 \
         by default)"
    } else if lower.contains("certificaterequired") || lower.contains("certificate required") {
        " (the broker wants a client certificate: give one with `TlsOptions::client_cert_files`)"
    } else {
        ""
    }
}

/// The TCP connection, TLS when the URI asks for it, then the AMQP
/// handshake. Name resolution, the socket and the handshake all happen on
/// lapin's I/O thread, through the transport given here.
async fn open(
    address: &Address,
    properties: ConnectionProperties,
    tls: Option<tls::Loaded>,
) -> lapin::Result<Connection> {
    let runtime = lapin::runtime::default_runtime()?;
    let tls = Arc::new(tls);
    Connection::connector(
        address.uri.clone(),
        runtime,
        async move |uri: AMQPUri, runtime| {
            let host = uri.authority.host.as_str();
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, uri.authority.port))
                .await?
                .collect();
            let stream = AsyncTcpStream::connect(&runtime, addresses).await?;
            match (uri.scheme, tls.as_ref()) {
                (AMQPScheme::AMQP, _) => Ok(stream),
                (AMQPScheme::AMQPS, Some(tls)) => {
                    let name = tls.server_name.as_deref().unwrap_or(host);
                    Ok(stream.into_tls(name, tls.config.as_ref()).await?)
                }
                // `dial` loads the TLS material for every `amqps://` address.
                (AMQPScheme::AMQPS, None) => Err(lapin::Error::from(std::io::Error::other(
                    "TLS was asked for but not configured",
                ))),
            }
        },
        properties,
    )
    .await
}

/// Removes the address's password from an error text.
fn address_scrub(text: &str, address: &Address) -> String {
    let password = &address.uri.authority.userinfo.password;
    if password.is_empty() {
        text.to_owned()
    } else {
        text.replace(password.as_str(), "***")
    }
}

pub(crate) fn connection_properties(options: &RabbitMqOptions) -> ConnectionProperties {
    let mut props = ConnectionProperties::default();
    if let Some(locale) = options.settings().locale() {
        props = props.with_locale(properties::short(locale));
    }
    for (key, value) in options.settings().client_properties() {
        props =
            props.with_client_property(properties::short(key), LongString::from(value.as_str()));
    }
    if let Some(name) = options.settings().connection_name() {
        props = props.with_connection_name(LongString::from(name));
    }
    props
}

/// Checks the TLS files once, when the backend first connects: a missing
/// or malformed file is a configuration error, not something to retry.
pub(crate) fn check_tls(addresses: &[Address], tls: &TlsOptions) -> Result<(), Error> {
    if addresses.iter().any(Address::is_tls) {
        tls.load()?;
    }
    Ok(())
}

/// One connection for a tool that drives lapin itself (the `queuey`
/// command): the same parsing, TLS, `EXTERNAL` rule, bounds and scrubbed
/// errors as the backend's own connections, without reconnection.
pub async fn connect_plain_lapin(
    url: &str,
    options: &RabbitMqOptions,
) -> Result<Connection, Error> {
    let address = parse(url, options)?;
    check_tls(std::slice::from_ref(&address), &options.tls)?;
    dial(&address, options)
        .await
        .map_err(|failure| failure.error)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn tls_failures_say_what_to_do() {
        assert!(tls_hint("IO error: invalid peer certificate: UnknownIssuer").contains("ca_file"));
        assert!(tls_hint("invalid peer certificate: NotValidForName").contains("server_name"));
        assert!(
            tls_hint("IO error: received corrupt message of type InvalidContentType")
                .contains("5671")
        );
        assert!(
            tls_hint("received fatal alert: CertificateRequired").contains("client_cert_files")
        );
        assert_eq!(tls_hint("Connection refused (os error 111)"), "");
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
