//! The names of `--public-host`, and the strict reading of `Host` and
//! `Origin` authorities they are compared with.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
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
    /// Whether clients reach this name over https.
    #[cfg(test)]
    pub(crate) fn is_https(&self) -> bool {
        self.https
    }

    pub(super) fn effective_port(&self) -> u16 {
        self.port.unwrap_or(default_port(self.https))
    }

    /// Whether a request's `Host` (already parsed) names this host.
    pub(super) fn matches(&self, name: &HostName, port: Option<u16>) -> bool {
        self.name == *name && port.unwrap_or(default_port(self.https)) == self.effective_port()
    }
}

impl FromStr for PublicHost {
    type Err = OpsError;

    fn from_str(text: &str) -> Result<Self> {
        let lower = text.to_ascii_lowercase();
        let (https, authority) = if let Some(rest) = lower.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = lower.strip_prefix("http://") {
            (false, rest)
        } else {
            (false, lower.as_str())
        };
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

impl fmt::Display for PublicHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.https {
            f.write_str("https://")?;
        }
        write!(f, "{}", self.name)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// A host as it appears in `Host` and `Origin`: an IP address or a name
/// (lowercase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostName {
    Ip(IpAddr),
    Name(String),
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            HostName::Ip(ip) => write!(f, "{ip}"),
            HostName::Name(name) => f.write_str(name),
        }
    }
}

pub(super) fn default_port(https: bool) -> u16 {
    if https { 443 } else { 80 }
}

/// `host[:port]` or `[v6][:port]`, strictly: no user, path or stray
/// characters, a port of digits only.
pub(super) fn parse_authority(text: &str) -> Option<(HostName, Option<u16>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let ip: Ipv6Addr = inside.parse().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (HostName::Ip(IpAddr::V6(ip)), port)
    } else {
        let (host, port) = match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        let valid = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !valid {
            return None;
        }
        let host = host.to_ascii_lowercase();
        let name = match host.parse::<Ipv4Addr>() {
            Ok(ip) => HostName::Ip(IpAddr::V4(ip)),
            Err(_) => HostName::Name(host),
        };
        (name, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_hosts_parse_strictly() {
        let p: PublicHost = "HTTPS://Ops.Example.com:8443/".parse().unwrap();
        assert_eq!(p.to_string(), "https://ops.example.com:8443");
        assert!(p.is_https());
        assert_eq!(
            "[::1]:9".parse::<PublicHost>().unwrap().to_string(),
            "[::1]:9"
        );
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
