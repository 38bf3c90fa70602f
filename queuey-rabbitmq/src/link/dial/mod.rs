//! Opening one connection to one broker address: the TCP connection, TLS
//! for `amqps://`, and the AMQP handshake, within the connect bound. Every
//! connection the crate opens goes through [`dial`], the first one and
//! every reconnection alike. Parsing the address is `address`; what a
//! failure tells the user to check is `hint`; whether trying again can
//! help is `outlook`.

mod address;
mod hint;
mod outlook;

use std::net::SocketAddr;
use std::sync::Arc;

use lapin::tcp::AsyncTcpStream;
use lapin::types::LongString;
use lapin::uri::{AMQPScheme, AMQPUri};
use lapin::{Connection, ConnectionProperties, ErrorKind};
use queuey_core::{BackendError, BackendErrorKind, Error};

use crate::tls::{self, TlsOptions};
use crate::{RabbitMqOptions, properties};
pub(crate) use address::{Address, parse};
use hint::{CHECK_ADDRESS, tls_hint, unreachable_hint};
pub(crate) use outlook::Outlook;

/// A failed connection attempt, and whether trying again can help.
pub(crate) struct DialFailure {
    pub(crate) error: Error,
    pub(crate) outlook: Outlook,
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
    let tls = address.is_tls().then(|| options.tls.load()).transpose();
    let tls = tls.map_err(|error| DialFailure {
        error,
        outlook: Outlook::Misconfigured,
    })?;
    let connecting = open(address, connection_properties(options), tls);
    match tokio::time::timeout(options.connect_timeout, connecting).await {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(e)) => {
            let outlook = outlook::outlook(&e);
            let kind = match (e.kind(), outlook) {
                (ErrorKind::ProtocolError(_), _) | (_, Outlook::Refused) => {
                    BackendErrorKind::Refused
                }
                _ => BackendErrorKind::ConnectionLost,
            };
            let text = address_scrub(&e.to_string(), address);
            let hint = match unreachable_hint(&e) {
                "" if address.is_tls() => tls_hint(&text),
                hint => hint,
            };
            Err(DialFailure {
                error: Error::Backend(BackendError::new(
                    kind,
                    format!("connecting to RabbitMQ at `{redacted}`: {text}{hint}"),
                )),
                outlook,
            })
        }
        Err(_) => Err(DialFailure {
            error: Error::Backend(BackendError::new(
                BackendErrorKind::TimedOut,
                format!(
                    "connecting to RabbitMQ at `{redacted}`: no answer within {:?}{CHECK_ADDRESS}",
                    options.connect_timeout
                ),
            )),
            outlook: Outlook::Transient,
        }),
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
                    Ok(stream
                        .into_tls(name, tls.config.as_ref())
                        .await
                        .map_err(outlook::tls_handshake_failed)?)
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
