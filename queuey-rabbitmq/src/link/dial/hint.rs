//! What to do about a connection that could not be opened, from the error.

use lapin::ErrorKind;

/// What to check when nothing answered at an address.
pub(super) const CHECK_ADDRESS: &str = " (check that RabbitMQ runs at that address and port, and that \
                             `AMQP_URL`, or whichever address was given, is right)";

/// What to check when the connection could not be opened at all: nothing
/// listens at the address, or the host cannot be reached or resolved.
pub(super) fn unreachable_hint(error: &lapin::Error) -> &'static str {
    let ErrorKind::IOError(io) = error.kind() else {
        return "";
    };
    match io.kind() {
        std::io::ErrorKind::ConnectionRefused
        | std::io::ErrorKind::HostUnreachable
        | std::io::ErrorKind::NetworkUnreachable
        | std::io::ErrorKind::AddrNotAvailable
        | std::io::ErrorKind::TimedOut => CHECK_ADDRESS,
        // Name resolution reports no kind of its own, only its text.
        _ if io.to_string().contains("lookup address") => {
            " (the host name does not resolve: check the host in `AMQP_URL`, or in whichever \
             address was given)"
        }
        _ => "",
    }
}

/// What to do about the usual TLS failures, from the TLS library's text.
pub(super) fn tls_hint(text: &str) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn an_address_nothing_answers_at_says_what_to_check() {
        let io = |kind| lapin::Error::from(std::io::Error::from(kind));
        for kind in [
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::HostUnreachable,
            std::io::ErrorKind::NetworkUnreachable,
        ] {
            let hint = unreachable_hint(&io(kind));
            assert!(
                hint.contains("check that RabbitMQ runs at that address"),
                "{hint}"
            );
            assert!(hint.contains("`AMQP_URL`"), "{hint}");
        }
        let unresolved = lapin::Error::from(std::io::Error::other(
            "failed to lookup address information: Name or service not known",
        ));
        assert!(unreachable_hint(&unresolved).contains("does not resolve"));
        // A broken connection, or the broker refusing the login, is
        // something else.
        assert_eq!(
            unreachable_hint(&io(std::io::ErrorKind::ConnectionReset)),
            ""
        );
        assert_eq!(
            unreachable_hint(&lapin::Error::from(ErrorKind::MissingHeartbeatError)),
            ""
        );
    }
}
