//! Where the management API is and who reads it. Pure: no I/O.
//!
//! The base URL is the one given, else the AMQP address's host on
//! RabbitMQ's default management port for its scheme: `http://HOST:15672`
//! for `amqp://`, `https://HOST:15671` for `amqps://`. The user and
//! password are those of the given URL when it carries any (they are then
//! taken out of it, so the base can be shown), else the AMQP address's;
//! the virtual host is the AMQP address's.
//!
//! A given plain `http://` URL on another host than this machine is
//! refused when the AMQP address is `amqps://` ([`EndpointError::PlainHttp`]):
//! the password would cross the network in clear beside a connection the
//! application chose to encrypt.

use std::fmt;

use queuey_core::uri::{percent_decode, percent_encode, redact};

/// RabbitMQ's default management port over http.
pub const HTTP_PORT: u16 = 15672;
/// RabbitMQ's default management port over https.
pub const HTTPS_PORT: u16 = 15671;

/// Why no management API endpoint follows from an AMQP address and a
/// given URL. Its messages quote no password.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointError {
    /// The AMQP address is not an `amqp://` or `amqps://` URI.
    NotAmqp {
        /// The address, its password masked.
        amqp: String,
        /// What is wrong with it.
        why: String,
    },
    /// The given management URL is not an `http://` or `https://` URL with
    /// a host.
    NotHttp {
        /// The URL, its password masked.
        given: String,
        /// What is wrong with it.
        why: String,
    },
    /// The given management URL is plain `http://` to another host than
    /// this machine while the AMQP address is `amqps://`.
    PlainHttp {
        /// The URL, without its credentials.
        base: String,
    },
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointError::NotAmqp { amqp, why } => {
                write!(f, "`{amqp}` is not an AMQP URI: {why}")
            }
            EndpointError::NotHttp { given, why } => {
                write!(f, "the management URL `{given}` {why}")
            }
            EndpointError::PlainHttp { base } => write!(
                f,
                "the management URL `{base}` is plain http to another host while the AMQP \
                 address is amqps://: the management password would cross the network in clear, \
                 so the management API is not read; give an https:// URL"
            ),
        }
    }
}

impl std::error::Error for EndpointError {}

/// The management API of one virtual host, and the credentials to read it.
/// Its `Debug` output masks the password, and no accessor returns it.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `scheme://host:port[/prefix]`, without credentials or a final `/`.
    base: String,
    user: String,
    pub(super) password: String,
    vhost: String,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base", &self.base)
            .field("user", &self.user)
            .field("password", &"***")
            .field("vhost", &self.vhost)
            .finish()
    }
}

impl Endpoint {
    /// The endpoint for the AMQP address `amqp` (`amqp://` or
    /// `amqps://`), at the management URL `given` when set
    /// (`http(s)://[user:password@]host[:port][/prefix]`). The error quotes
    /// no password.
    ///
    /// ```
    /// use queuey_rabbitmq::management::Endpoint;
    ///
    /// let e = Endpoint::new("amqps://app:secret@rabbit.internal/prod", None)?;
    /// assert_eq!(e.base(), "https://rabbit.internal:15671");
    /// assert_eq!((e.user(), e.vhost()), ("app", "prod"));
    /// assert_eq!(e.vhost_path("queues", &["q.deferred.quorum.500"]), "queues/prod/q.deferred.quorum.500");
    /// assert!(!format!("{e:?}").contains("secret"));
    /// # Ok::<(), queuey_rabbitmq::management::EndpointError>(())
    /// ```
    pub fn new(amqp: &str, given: Option<&str>) -> Result<Endpoint, EndpointError> {
        let not_amqp = |why: String| EndpointError::NotAmqp {
            amqp: redact(amqp),
            why,
        };
        // Parsed as a URL: the AMQP client's own parser turns IP addresses
        // into `localhost`.
        let uri = reqwest::Url::parse(amqp).map_err(|e| not_amqp(e.to_string()))?;
        let secure = match uri.scheme() {
            "amqp" => false,
            "amqps" => true,
            other => return Err(not_amqp(format!("scheme `{other}`"))),
        };
        // An IPv6 literal comes in brackets, as a URL needs it.
        let host = uri
            .host_str()
            .filter(|h| !h.is_empty())
            .unwrap_or("localhost");
        let vhost = match percent_decode(uri.path().strip_prefix('/').unwrap_or_default()) {
            vhost if vhost.is_empty() => "/".to_owned(),
            vhost => vhost,
        };
        let (mut user, mut password) = match uri.username() {
            "" => ("guest".to_owned(), "guest".to_owned()),
            user => (
                percent_decode(user),
                percent_decode(uri.password().unwrap_or_default()),
            ),
        };
        let base = match given {
            Some(given) => {
                let not_http = |why: String| EndpointError::NotHttp {
                    given: redact(given),
                    why,
                };
                let mut url = reqwest::Url::parse(given)
                    .map_err(|e| not_http(format!("is not a URL: {e}")))?;
                if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                    return Err(not_http(
                        "must be an http:// or https:// URL with a host".to_owned(),
                    ));
                }
                if !url.username().is_empty() {
                    user = percent_decode(url.username());
                    password = percent_decode(url.password().unwrap_or_default());
                }
                // Never fails on an http(s) URL with a host.
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url.set_query(None);
                url.set_fragment(None);
                let base = url.as_str().trim_end_matches('/').to_owned();
                if secure && url.scheme() == "http" && !is_local(&url) {
                    return Err(EndpointError::PlainHttp { base });
                }
                base
            }
            None if secure => format!("https://{host}:{HTTPS_PORT}"),
            None => format!("http://{host}:{HTTP_PORT}"),
        };
        Ok(Endpoint {
            base,
            user,
            password,
            vhost,
        })
    }

    /// The base URL, `scheme://host:port[/prefix]`, without credentials or
    /// a final `/`: fit to be shown.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The user the API is read as.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The virtual host, decoded (`/` for the default one).
    pub fn vhost(&self) -> &str {
        &self.vhost
    }

    /// Whether the API is read over https.
    pub fn is_https(&self) -> bool {
        self.base.starts_with("https:")
    }

    /// The path under `/api/` of `collection` in this virtual host, then
    /// `names`, each percent-encoded as one path segment:
    /// `queues/%2F/app.emails` for `("queues", &["app.emails"])` in `/`.
    pub fn vhost_path(&self, collection: &str, names: &[&str]) -> String {
        let mut path = format!("{collection}/{}", percent_encode(&self.vhost));
        for name in names {
            path.push('/');
            path.push_str(&percent_encode(name));
        }
        path
    }
}

/// Whether the URL names this machine: `localhost` or a loopback address.
fn is_local(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_follows_the_first_amqp_address() {
        let e = Endpoint::new("amqp://app:p%40ss@rabbit.local:5672/prod", None).unwrap();
        assert_eq!(e.base, "http://rabbit.local:15672");
        assert_eq!((e.user.as_str(), e.password.as_str()), ("app", "p@ss"));
        assert_eq!(e.vhost, "prod");
        assert_eq!(e.vhost_path("queues", &["a b"]), "queues/prod/a%20b");

        let e = Endpoint::new("amqps://app:pw@rabbit.local/%2f", None).unwrap();
        assert_eq!(e.base, "https://rabbit.local:15671");
        assert_eq!(e.vhost, "/");
        assert_eq!(e.vhost_path("queues", &[]), "queues/%2F");

        let e = Endpoint::new("amqp://[::1]:5672/%2f", None).unwrap();
        assert_eq!(e.base, "http://[::1]:15672");
        assert_eq!((e.user.as_str(), e.password.as_str()), ("guest", "guest"));
        let e = Endpoint::new("amqp://u:p@10.1.2.3", None).unwrap();
        assert_eq!(
            (e.base.as_str(), e.vhost.as_str()),
            ("http://10.1.2.3:15672", "/")
        );
    }

    #[test]
    fn a_given_url_wins_and_its_credentials_replace_the_amqp_ones() {
        let e = Endpoint::new(
            "amqp://app:pw@rabbit/%2f",
            Some("https://ops:s%3Acret@mgmt.internal/rabbitmq/?x=1"),
        )
        .unwrap();
        assert_eq!(e.base, "https://mgmt.internal/rabbitmq");
        assert_eq!((e.user.as_str(), e.password.as_str()), ("ops", "s:cret"));
        assert_eq!(e.vhost, "/");

        let e = Endpoint::new("amqp://app:pw@rabbit/v", Some("http://127.0.0.1:15680")).unwrap();
        assert_eq!(e.base, "http://127.0.0.1:15680");
        assert_eq!((e.user.as_str(), e.password.as_str()), ("app", "pw"));
    }

    #[test]
    fn plain_http_to_another_host_is_refused_beside_amqps() {
        let refused = Endpoint::new(
            "amqps://app:SECRETPW@rabbit/%2f",
            Some("http://rabbit:15672"),
        )
        .unwrap_err();
        assert_eq!(
            refused,
            EndpointError::PlainHttp {
                base: "http://rabbit:15672".into()
            }
        );
        let said = refused.to_string();
        assert!(
            said.contains("https://") && !said.contains("SECRETPW"),
            "{said}"
        );
        // Credentials of the URL itself are not quoted either.
        let refused = Endpoint::new(
            "amqps://app:pw@rabbit/%2f",
            Some("http://ops:SECRETPW@mgmt.internal/"),
        )
        .unwrap_err();
        assert!(matches!(refused, EndpointError::PlainHttp { .. }));
        assert!(!refused.to_string().contains("SECRETPW"), "{refused}");

        // This machine, https, or plaintext AMQP anyway: allowed.
        for local in [
            "http://127.0.0.1:15672",
            "http://localhost:15672",
            "http://[::1]:15672",
        ] {
            let e = Endpoint::new("amqps://app:pw@rabbit/%2f", Some(local)).unwrap();
            assert_eq!(e.password, "pw", "{local}");
        }
        Endpoint::new("amqps://app:pw@rabbit/%2f", Some("https://rabbit:15671")).unwrap();
        Endpoint::new("amqp://app:pw@rabbit/%2f", Some("http://rabbit:15672")).unwrap();
        // Without a given URL, amqps:// leads to https.
        let e = Endpoint::new("amqps://app:pw@rabbit/%2f", None).unwrap();
        assert!(e.base.starts_with("https://"), "{}", e.base);
    }

    #[test]
    fn errors_and_debug_output_hide_passwords() {
        let bad = Endpoint::new("amqp://app:SECRETPW@rabbit/%2f", Some("ftp://u:SECRETPW@h"))
            .unwrap_err()
            .to_string();
        assert!(!bad.contains("SECRETPW"), "{bad}");
        let bad = Endpoint::new("nonsense://app:SECRETPW@h", None)
            .unwrap_err()
            .to_string();
        assert!(!bad.contains("SECRETPW"), "{bad}");
        let e = Endpoint::new("amqp://app:SECRETPW@rabbit/%2f", None).unwrap();
        assert!(!format!("{e:?}").contains("SECRETPW"));
    }
}
