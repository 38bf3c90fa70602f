//! What a failed connection attempt says about the next one: whether
//! waiting can make it work.
//!
//! The rule, from the error alone:
//!
//! | the attempt failed because | outlook |
//! |---|---|
//! | nothing accepted the connection, it was reset or aborted, it timed out, the network or host was unreachable, the host name did not resolve | [`Outlook::Transient`] |
//! | the broker closed the handshake with any reply code but those below (it is starting or stopping, say), or a virtual host that exists is down | [`Outlook::Transient`] |
//! | the TLS handshake failed on anything but a broken transport (a certificate that does not verify, a port that does not speak TLS, a client certificate wanted), or the TLS layer refused data later (an alert such as the broker refusing the client certificate, which TLS 1.3 sends after the handshake) | [`Outlook::Misconfigured`] |
//! | the port answered in something other than AMQP 0-9-1 | [`Outlook::Misconfigured`] |
//! | the broker refused the login (403), the virtual host (530) or a resource (404), or the client could not produce credentials | [`Outlook::Refused`] |
//!
//! A host name that does not resolve counts as transient on purpose: in a
//! cluster scheduler a broker's name often resolves only once its node is
//! up. A misspelt name thus waits too, and says so in every log line of
//! the wait.

use std::fmt;
use std::io;

use lapin::ErrorKind;

use crate::error::code;

/// What a failed connection attempt says about the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outlook {
    /// The broker cannot be reached, or is not ready, yet: worth trying
    /// again, at the first connection as on a reconnection.
    Transient,
    /// The address answers, but not as configured: the first connection
    /// fails at once. A reconnection tries again, since the certificate
    /// files are read again for each and may have been renewed.
    Misconfigured,
    /// The broker refused the credentials or the virtual host: nothing but
    /// a change of configuration helps. Fails the first connection and
    /// ends reconnecting.
    Refused,
}

/// The outlook after a connection attempt failed with `error`.
pub(crate) fn outlook(error: &lapin::Error) -> Outlook {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.get_id() {
            // RabbitMQ answers 530 for a virtual host that is missing and
            // for one that exists but is down (restarting after a crash):
            // only the second heals.
            530 if amqp.get_message().as_str().contains("is down") => Outlook::Transient,
            403 | 530 | code::NOT_FOUND => Outlook::Refused,
            _ => Outlook::Transient,
        },
        ErrorKind::AuthProviderError(_) => Outlook::Refused,
        ErrorKind::InvalidProtocolVersion(_) | ErrorKind::ParsingError(_) => Outlook::Misconfigured,
        // rustls reports every TLS failure as invalid data; nothing else on
        // the way to the broker does.
        ErrorKind::IOError(io)
            if io.kind() == io::ErrorKind::InvalidData
                || (in_tls_handshake(io) && !broken_transport(io.kind())) =>
        {
            Outlook::Misconfigured
        }
        _ => Outlook::Transient,
    }
}

/// Marks an error of the TLS handshake, so that [`outlook`] can tell a
/// certificate refused from a connection refused. Keeps the kind and the
/// text of the error it wraps.
pub(super) fn tls_handshake_failed(error: io::Error) -> io::Error {
    io::Error::new(error.kind(), TlsHandshake(error))
}

/// An error of the TLS handshake (see [`tls_handshake_failed`]).
#[derive(Debug)]
struct TlsHandshake(io::Error);

impl fmt::Display for TlsHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TlsHandshake {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

fn in_tls_handshake(error: &io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<TlsHandshake>().is_some())
}

/// Kinds of I/O error that say the connection itself broke (the broker
/// went away mid-handshake), not that the handshake was refused.
fn broken_transport(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::AMQPError;

    fn io(kind: io::ErrorKind) -> lapin::Error {
        lapin::Error::from(io::Error::from(kind))
    }

    fn tls(kind: io::ErrorKind, text: &str) -> lapin::Error {
        lapin::Error::from(tls_handshake_failed(io::Error::new(kind, text.to_owned())))
    }

    fn closed_with(code: u16, text: &str) -> lapin::Error {
        let amqp = AMQPError::from_id(code, text.into()).expect("a known reply code");
        lapin::Error::from(ErrorKind::ProtocolError(amqp))
    }

    #[test]
    fn a_broker_that_cannot_be_reached_yet_is_waited_for() {
        for kind in [
            io::ErrorKind::ConnectionRefused,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::TimedOut,
            io::ErrorKind::HostUnreachable,
            io::ErrorKind::NetworkUnreachable,
            io::ErrorKind::AddrNotAvailable,
        ] {
            assert_eq!(outlook(&io(kind)), Outlook::Transient, "{kind:?}");
        }
        // Name resolution fails with an untyped error: a name that does not
        // resolve yet is waited for.
        let unresolved = lapin::Error::from(io::Error::other(
            "failed to lookup address information: Name or service not known",
        ));
        assert_eq!(outlook(&unresolved), Outlook::Transient);
        assert_eq!(
            outlook(&lapin::Error::from(ErrorKind::MissingHeartbeatError)),
            Outlook::Transient
        );
        // The broker closing the handshake while it stops or starts.
        let forced = closed_with(320, "CONNECTION_FORCED - broker forced connection closure");
        assert_eq!(outlook(&forced), Outlook::Transient);
        let down = closed_with(530, "NOT_ALLOWED - vhost / is down");
        assert_eq!(outlook(&down), Outlook::Transient);
    }

    #[test]
    fn credentials_and_missing_virtual_hosts_are_refused_for_good() {
        let login = closed_with(403, "ACCESS_REFUSED - Login was refused");
        assert_eq!(outlook(&login), Outlook::Refused);
        let vhost = closed_with(530, "NOT_ALLOWED - vhost nowhere not found");
        assert_eq!(outlook(&vhost), Outlook::Refused);
        assert_eq!(
            outlook(&closed_with(404, "NOT_FOUND - no such thing")),
            Outlook::Refused
        );
        let no_credentials = lapin::Error::from(ErrorKind::AuthProviderError("no token".into()));
        assert_eq!(outlook(&no_credentials), Outlook::Refused);
    }

    #[test]
    fn a_tls_handshake_refused_is_a_misconfiguration_but_a_broken_one_is_not() {
        for text in [
            "invalid peer certificate: UnknownIssuer",
            "invalid peer certificate: NotValidForName",
            "received corrupt message of type InvalidContentType",
            "received fatal alert: CertificateRequired",
        ] {
            let refused = tls(io::ErrorKind::InvalidData, text);
            assert_eq!(outlook(&refused), Outlook::Misconfigured, "{text}");
            // The text is the TLS library's, unchanged: the hints read it.
            assert_eq!(refused.to_string(), format!("IO error: {text}"));
        }
        assert_eq!(
            outlook(&tls(io::ErrorKind::Other, "handshake failure")),
            Outlook::Misconfigured
        );
        // TLS 1.3: the broker refuses the client certificate after the
        // client's side of the handshake is done, with an alert.
        let alert = lapin::Error::from(io::Error::new(
            io::ErrorKind::InvalidData,
            "received fatal alert: UnknownCA",
        ));
        assert_eq!(outlook(&alert), Outlook::Misconfigured);
        for kind in [
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::TimedOut,
        ] {
            assert_eq!(
                outlook(&tls(kind, "the connection broke")),
                Outlook::Transient,
                "{kind:?}"
            );
        }
    }
}
