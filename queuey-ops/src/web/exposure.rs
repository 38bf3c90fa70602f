//! Which names the dashboard answers to, and which pages may change things.
//!
//! Against cross-site requests and DNS rebinding:
//!
//! - **Host.** A request must name the dashboard: a loopback name or the
//!   address the connection arrived on, with the listening port (none only
//!   for 80), or a `--public-host`; else `421 Misdirected Request`.
//! - **Origin.** A change (any method but GET, HEAD, OPTIONS) gets `403`
//!   when its `Origin` is not the dashboard's, or `Sec-Fetch-Site` says
//!   `cross-site` or `same-site`. `Origin: null` passes only beside
//!   `Sec-Fetch-Site: same-origin`; neither header: Host and CSRF decide.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;

use super::App;
use super::public_host::{HostName, PublicHost, parse_authority, split_scheme};

/// The rules of one dashboard: its listening address and public hosts.
#[derive(Debug, Clone)]
pub(crate) struct Exposure {
    pub(super) listen: SocketAddr,
    pub(super) public: Vec<PublicHost>,
}

/// What the checks learnt about a request that passed them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Served {
    /// The request named a `--public-host https://…`: cookies get `Secure`.
    pub(crate) https: bool,
}

impl Served {
    /// How `req` was served (plain http when the check did not run).
    pub(crate) fn of(req: &Request) -> Served {
        req.extensions()
            .get::<Served>()
            .copied()
            .unwrap_or_default()
    }

    /// Sets the cookie `name` to `value` on `response`: `HttpOnly`,
    /// `SameSite=Strict`, and `Secure` when served over https.
    pub(crate) fn set_cookie(self, response: &mut Response, name: &str, value: &str) {
        let secure = if self.https { "; Secure" } else { "" };
        let cookie = format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/{secure}");
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
}

impl Exposure {
    /// Whether `name` is the local side of the connection: a loopback name
    /// or the address it arrived on.
    fn is_local(name: &HostName, local: SocketAddr) -> bool {
        let local_ip = local.ip().to_canonical();
        let loopback: [IpAddr; 2] = [Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()];
        match name {
            HostName::Name(n) => n == "localhost",
            HostName::Ip(ip) => {
                let ip = ip.to_canonical();
                loopback.contains(&ip) || (!local_ip.is_unspecified() && ip == local_ip)
            }
        }
    }

    /// `Some(served)` when `authority` (a `Host` value) names this dashboard
    /// on a connection whose local address is `local`.
    pub(crate) fn host(&self, authority: &str, local: SocketAddr) -> Option<Served> {
        let (name, port) = parse_authority(authority)?;
        if Exposure::is_local(&name, local) && port.unwrap_or(80) == local.port() {
            return Some(Served { https: false });
        }
        let mut matching = self.public.iter().filter(|p| p.matches(&name, port));
        let first = matching.next()?;
        Some(Served {
            https: first.https || matching.any(|p| p.https),
        })
    }

    /// Whether `origin` (an `Origin` value) is one of this dashboard's.
    pub(crate) fn origin(&self, origin: &str, local: SocketAddr) -> bool {
        let origin = origin.to_ascii_lowercase();
        let Some((https, (name, port))) = split_scheme(&origin)
            .and_then(|(https, authority)| Some((https, parse_authority(authority)?)))
        else {
            return false;
        };
        let port = port.unwrap_or(if https { 443 } else { 80 });
        (!https && Exposure::is_local(&name, local) && port == local.port())
            || self
                .public
                .iter()
                .any(|p| p.https == https && p.matches(&name, Some(port)))
    }

    /// Why a request that may change something is refused, if it is.
    pub(crate) fn foreign(&self, headers: &HeaderMap, local: SocketAddr) -> Option<String> {
        let site = headers
            .get("sec-fetch-site")
            .map(|v| v.to_str().unwrap_or(""));
        if let Some(site) = site
            && !matches!(site, "same-origin" | "none")
        {
            return Some(format!(
                "the browser says it comes from another site (Sec-Fetch-Site `{}`)",
                shown(site)
            ));
        }
        let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or("");
        let hidden = origin == "null" && site == Some("same-origin");
        (!hidden && !self.origin(origin, local))
            .then(|| format!("its Origin `{}` is not this dashboard", shown(origin)))
    }
}

/// A header value fit for an error message: short and printable.
fn shown(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(100)
        .collect()
}

/// The local address of a connection, for the Host check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalAddr(pub(crate) Option<SocketAddr>);

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for LocalAddr {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        LocalAddr(stream.io().local_addr().ok())
    }
}

/// The Host and Origin checks, before authentication.
pub(crate) async fn check(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let rules = &app.exposure;
    let local = req
        .extensions()
        .get::<ConnectInfo<LocalAddr>>()
        .and_then(|c| c.0.0)
        .unwrap_or(rules.listen);
    // The request line's authority and the one Host header must agree.
    let uri = req.uri().authority().map(|a| a.as_str());
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host = hosts.next().map(|h| h.to_str().ok());
    let asked = uri.or(host.flatten());
    let served = match (uri, host) {
        _ if hosts.next().is_some() => None,
        (Some(a), Some(Some(h))) if a != h => None,
        _ => asked.and_then(|a| rules.host(a, local)),
    };
    let Some(served) = served else {
        let asked = asked.map(shown).unwrap_or_default();
        let body = if asked.is_empty() {
            "this dashboard answers only requests that name it in their Host header".to_owned()
        } else {
            format!(
                "this dashboard does not answer to the host `{asked}`: it answers to localhost, \
                 127.0.0.1, [::1] and its listening address on port {port}, and to the names \
                 given with --public-host. If `{asked}` is how clients reach it (a DNS name, a \
                 proxy), start it with --public-host {asked}",
                port = local.port()
            )
        };
        return (StatusCode::MISDIRECTED_REQUEST, body).into_response();
    };
    if !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        && let Some(why) = rules.foreign(req.headers(), local)
    {
        let body = format!(
            "refused: {why}, and the dashboard accepts changes only from its own pages. If it \
             is served under another name, start it with --public-host NAME[:PORT] (or \
             https://NAME behind a TLS proxy)"
        );
        return (StatusCode::FORBIDDEN, body).into_response();
    }
    req.extensions_mut().insert(served);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(public: &[&str]) -> Exposure {
        Exposure {
            listen: "127.0.0.1:18431".parse().unwrap(),
            public: public.iter().map(|p| p.parse().unwrap()).collect(),
        }
    }

    fn local() -> SocketAddr {
        "127.0.0.1:18431".parse().unwrap()
    }

    #[test]
    fn loopback_names_with_the_listening_port_are_the_dashboard() {
        let r = rules(&[]);
        for ok in [
            "localhost:18431",
            "LOCALHOST:18431",
            "127.0.0.1:18431",
            "[::1]:18431",
        ] {
            assert!(r.host(ok, local()).is_some(), "{ok}");
        }
        for refused in [
            "rebind.attacker.example:18431",
            "rebind.attacker.example",
            "localhost:8080",
            "localhost",
            "127.0.0.1",
            "localhost.:18431",
            "evil@localhost:18431",
            "localhost:18431/x",
            "localhost:+18431",
            "localhost:",
            "",
            "10.0.0.5:18431",
        ] {
            assert!(r.host(refused, local()).is_none(), "{refused}");
        }
    }

    #[test]
    fn a_missing_port_stands_for_port_80_only() {
        let r = rules(&[]);
        let on_80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(r.host("localhost", on_80).is_some());
        assert!(r.host("localhost:80", on_80).is_some());
        assert!(r.host("localhost", local()).is_none());
    }

    #[test]
    fn the_address_a_connection_arrived_on_is_the_dashboard() {
        let r = Exposure {
            listen: "0.0.0.0:18431".parse().unwrap(),
            public: vec![],
        };
        let lan: SocketAddr = "192.168.1.5:18431".parse().unwrap();
        assert!(r.host("192.168.1.5:18431", lan).is_some());
        assert!(r.host("192.168.1.6:18431", lan).is_none());
        assert!(
            r.host("0.0.0.0:18431", "0.0.0.0:18431".parse().unwrap())
                .is_none()
        );
        let mapped: SocketAddr = "[::ffff:192.168.1.5]:18431".parse().unwrap();
        assert!(r.host("192.168.1.5:18431", mapped).is_some());
    }

    #[test]
    fn public_hosts_are_accepted_on_their_port() {
        let r = rules(&[
            "dash.example.com",
            "lan-box:18431",
            "https://ops.example.com",
        ]);
        assert!(!r.host("dash.example.com", local()).unwrap().https);
        assert!(r.host("dash.example.com:80", local()).is_some());
        assert!(r.host("dash.example.com:18431", local()).is_none());
        assert!(r.host("lan-box:18431", local()).is_some());
        assert!(r.host("lan-box", local()).is_none());
        assert!(r.host("ops.example.com", local()).unwrap().https);
        assert!(r.host("ops.example.com:443", local()).unwrap().https);
        assert!(r.host("other.example.com", local()).is_none());
    }

    #[test]
    fn only_the_dashboards_own_origins_may_change_things() {
        let r = rules(&["https://ops.example.com", "lan-box:18431"]);
        for ok in [
            "http://127.0.0.1:18431",
            "http://localhost:18431",
            "http://[::1]:18431",
            "https://ops.example.com",
            "https://ops.example.com:443",
            "http://lan-box:18431",
        ] {
            assert!(r.origin(ok, local()), "{ok}");
        }
        for refused in [
            "null",
            "http://rebind.attacker.example:18431",
            "http://localhost:3000",
            "https://localhost:18431",
            "http://ops.example.com",
            "https://lan-box:18431",
            "http://127.0.0.1:18431/",
            "ftp://localhost:18431",
            "",
        ] {
            assert!(!r.origin(refused, local()), "{refused}");
        }
    }

    #[test]
    fn fetch_metadata_from_another_site_is_refused() {
        let r = rules(&[]);
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        assert_eq!(r.foreign(&headers(&[]), local()), None);
        assert_eq!(
            r.foreign(
                &headers(&[
                    ("origin", "http://127.0.0.1:18431"),
                    ("sec-fetch-site", "same-origin")
                ]),
                local()
            ),
            None
        );
        assert_eq!(
            r.foreign(&headers(&[("sec-fetch-site", "none")]), local()),
            None
        );
        // The dashboard's own form under its no-referrer policy.
        assert_eq!(
            r.foreign(
                &headers(&[("origin", "null"), ("sec-fetch-site", "same-origin")]),
                local()
            ),
            None
        );
        for hidden in [
            &[("origin", "null")][..],
            &[("origin", "null"), ("sec-fetch-site", "none")],
        ] {
            assert!(r.foreign(&headers(hidden), local()).is_some(), "{hidden:?}");
        }
        for site in ["cross-site", "same-site", "bogus"] {
            let mut h = headers(&[("origin", "http://127.0.0.1:18431")]);
            h.insert("sec-fetch-site", site.parse().unwrap());
            assert!(r.foreign(&h, local()).is_some(), "{site}");
        }
        let why = r
            .foreign(&headers(&[("origin", "http://attacker.example")]), local())
            .unwrap();
        assert!(why.contains("attacker.example"), "{why}");
    }
}
