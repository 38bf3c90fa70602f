//! The names of `--public-host`, and the strict reading of `Host` and
//! `Origin` authorities they are compared with.

use std::net::IpAddr;
use std::str::FromStr;

use crate::error::{OpsError, Result};

/// A name the dashboard is reached under besides localhost, as given to
/// `--public-host`: `NAME`, `NAME:PORT`, `http://NAME[:PORT]` or
/// `https://NAME[:PORT]`.
///
/// `https://` says that clients reach the dashboard over https through a
/// TLS-terminating proxy: its origin is then `https://NAME`, and the
/// dashboard's cookies get the `Secure` attribute on requests that name it.
/// Without a port the name stands for the scheme's default port (80, or
/// 443 with `https://`): give the port when clients use another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublicHost {
    pub(super) https: bool,
    pub(super) name: HostName,
    port: Option<u16>,
}

impl PublicHost {
    /// Whether an authority (already parsed) names this host; no port
    /// stands for the scheme's default.
    pub(super) fn matches(&self, name: &HostName, port: Option<u16>) -> bool {
        let default = if self.https { 443 } else { 80 };
        self.name == *name && port.unwrap_or(default) == self.port.unwrap_or(default)
    }
}

/// `https://REST` or `http://REST`: whether it is https, and REST.
pub(super) fn split_scheme(text: &str) -> Option<(bool, &str)> {
    (text.strip_prefix("https://").map(|rest| (true, rest)))
        .or_else(|| text.strip_prefix("http://").map(|rest| (false, rest)))
}

impl FromStr for PublicHost {
    type Err = OpsError;

    fn from_str(text: &str) -> Result<Self> {
        let lower = text.to_ascii_lowercase();
        let (https, authority) = split_scheme(&lower).unwrap_or((false, &lower[..]));
        let authority = authority.strip_suffix('/').unwrap_or(authority);
        let (name, port) = parse_authority(authority).ok_or_else(|| {
            OpsError::Invalid(format!(
                "--public-host `{text}` is not a host name: give NAME, NAME:PORT or \
                 https://NAME[:PORT] (no path, no user)"
            ))
        })?;
        Ok(PublicHost { https, name, port })
    }
}

/// A host as it appears in `Host` and `Origin`: an IP address or a name
/// (lowercase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostName {
    Ip(IpAddr),
    Name(String),
}

/// `host[:port]` or `[v6][:port]`, strictly: no user, path or stray
/// characters, a port of digits only.
pub(super) fn parse_authority(text: &str) -> Option<(HostName, Option<u16>)> {
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            (HostName::Ip(IpAddr::V6(inside.parse().ok()?)), port)
        }
        None => {
            let (host, port) = text
                .split_once(':')
                .map_or((text, None), |(h, p)| (h, Some(p)));
            let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
            if host.is_empty() || !host.bytes().all(allowed) {
                return None;
            }
            let host = host.to_ascii_lowercase();
            let ip = host.parse().map(|ip| HostName::Ip(IpAddr::V4(ip)));
            (ip.unwrap_or(HostName::Name(host)), port)
        }
    };
    let port = match port {
        Some(p) if p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) => return None,
        Some(p) => Some(p.parse().ok()?),
        None => None,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_hosts_parse_strictly() {
        let p: PublicHost = "HTTPS://Ops.Example.com:8443/".parse().unwrap();
        let name = HostName::Name("ops.example.com".into());
        assert_eq!((p.https, p.name, p.port), (true, name, Some(8443)));
        let p: PublicHost = "[::1]:9".parse().unwrap();
        let ip = HostName::Ip("::1".parse().unwrap());
        assert_eq!((p.https, p.name, p.port), (false, ip, Some(9)));
        for bad in [
            "",
            "a b",
            "user@host",
            "host/path",
            "host:99999",
            "https://",
            "[::1",
        ] {
            let e = bad.parse::<PublicHost>().unwrap_err().to_string();
            assert!(e.contains("--public-host"), "{bad}: {e}");
        }
    }

    #[test]
    fn authorities_parse_strictly() {
        assert_eq!(
            parse_authority("LocalHost:8080"),
            Some((HostName::Name("localhost".into()), Some(8080)))
        );
        assert_eq!(
            parse_authority("[::1]"),
            Some((HostName::Ip("::1".parse().unwrap()), None))
        );
        assert_eq!(
            parse_authority("127.0.0.1:80"),
            Some((HostName::Ip("127.0.0.1".parse().unwrap()), Some(80)))
        );
        for bad in [
            "",
            ":80",
            "a:b:c",
            "[::1]x",
            "[zz]:1",
            "host:",
            "host:+1",
            "h\u{e9}te",
        ] {
            assert_eq!(parse_authority(bad), None, "{bad}");
        }
    }
}
