//! The RabbitMQ management HTTP API: listing queues, their arguments,
//! effective policies and counts, and the node's alarms.
//!
//! Plain AMQP 0-9-1 cannot list queues or read a queue's arguments or the
//! policies applied to it, so the hold census and the topology check need
//! this API (the `rabbitmq_management` plugin). When it is not there, every
//! call says so with [`OpsError::ManagementMissing`].

use std::collections::BTreeMap;

use queuey_core::__private::root_cause;
use queuey_core::uri::{percent_decode, percent_encode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{OpsError, Result};
use crate::tls::TlsFiles;

/// The management port RabbitMQ uses by default, over http.
pub(crate) const DEFAULT_PORT: u16 = 15672;

/// The management port RabbitMQ uses by default over https.
pub(crate) const DEFAULT_TLS_PORT: u16 = 15671;

/// How many times a `GET` answered in the 5xx range is asked again.
const SERVER_ERROR_RETRIES: usize = SERVER_ERROR_PAUSES.len();

/// The pauses before each new ask of a `GET` answered in the 5xx range.
const SERVER_ERROR_PAUSES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(300),
    std::time::Duration::from_millis(900),
];

/// The error of a `GET` still answered in the 5xx range after every new
/// ask, saying so.
fn asked_again(error: OpsError) -> OpsError {
    match error {
        OpsError::Management { status, path, body } => OpsError::Management {
            status,
            path,
            body: match body.trim() {
                "" => format!("no explanation given, {} times", SERVER_ERROR_RETRIES + 1),
                said => format!("{said} ({} times)", SERVER_ERROR_RETRIES + 1),
            },
        },
        other => other,
    }
}

/// A client of one broker's management API, scoped to one vhost.
///
/// Its `Debug` output masks the password.
#[derive(Clone)]
pub(crate) struct Management {
    http: reqwest::Client,
    base: String,
    user: String,
    password: String,
    vhost: String,
}

impl std::fmt::Debug for Management {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Management")
            .field("base", &crate::amqp::redact_url(&self.base))
            .field("user", &self.user)
            .field("password", &"***")
            .field("vhost", &self.vhost)
            .finish_non_exhaustive()
    }
}

/// A queue as the management API reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QueueInfo {
    /// The name.
    pub(crate) name: String,
    /// Durable or not.
    #[serde(default)]
    pub(crate) durable: bool,
    /// Auto-delete or not.
    #[serde(default)]
    pub(crate) auto_delete: bool,
    /// Exclusive or not.
    #[serde(default)]
    pub(crate) exclusive: bool,
    /// `classic`, `quorum` or `stream`.
    #[serde(default, rename = "type")]
    pub(crate) queue_type: Option<String>,
    /// The declared arguments.
    #[serde(default)]
    pub(crate) arguments: BTreeMap<String, Value>,
    /// All messages (stats; absent until the first stats emission).
    #[serde(default)]
    pub(crate) messages: Option<u64>,
    /// Ready messages (stats).
    #[serde(default)]
    pub(crate) messages_ready: Option<u64>,
    /// Unacknowledged messages (stats).
    #[serde(default)]
    pub(crate) messages_unacknowledged: Option<u64>,
    /// Consumers (stats).
    #[serde(default)]
    pub(crate) consumers: Option<u64>,
    /// When the queue became idle (absent while in use).
    #[serde(default)]
    pub(crate) idle_since: Option<String>,
    /// The user policy applied.
    #[serde(default)]
    pub(crate) policy: Option<String>,
    /// The operator policy applied.
    #[serde(default)]
    pub(crate) operator_policy: Option<String>,
    /// The keys the policies set, merged as the broker applies them.
    #[serde(default)]
    pub(crate) effective_policy_definition: Option<Value>,
    /// Publish and delivery rates, when the broker collects them.
    #[serde(default)]
    pub(crate) message_stats: Option<Value>,
}

impl QueueInfo {
    /// An integer argument.
    pub(crate) fn int_argument(&self, name: &str) -> Option<i64> {
        self.arguments.get(name).and_then(Value::as_i64)
    }

    /// The keys of the effective policy definition.
    pub(crate) fn policy_keys(&self) -> BTreeMap<String, Value> {
        match &self.effective_policy_definition {
            Some(Value::Object(map)) => map.clone().into_iter().collect(),
            _ => BTreeMap::new(),
        }
    }

    /// A rate from `message_stats` (`publish`, `deliver_get`, `ack`…), per second.
    pub(crate) fn rate(&self, stat: &str) -> Option<f64> {
        self.message_stats
            .as_ref()?
            .get(format!("{stat}_details"))?
            .get("rate")?
            .as_f64()
    }
}

#[derive(Deserialize)]
struct Page {
    items: Vec<QueueInfo>,
    page_count: u64,
}

impl Management {
    /// A client for the broker that `amqp_url` names, with the platform's
    /// TLS roots. See [`for_amqp_url_tls`](Self::for_amqp_url_tls).
    #[cfg(test)]
    pub(crate) fn for_amqp_url(amqp_url: &str, base: Option<&str>) -> Result<Self> {
        Management::for_amqp_url_tls(amqp_url, base, &TlsFiles::default())
    }

    /// A client for the broker that `amqp_url` names.
    ///
    /// The base URL is `base` when given, else the AMQP host on the scheme
    /// that matches the AMQP URL's: `https://HOST:15671` for `amqps://`,
    /// `http://HOST:15672` for `amqp://`. The credentials are those of
    /// `base` when it carries any (they are then removed from it, so that
    /// it can be printed), else the AMQP URL's; the vhost is the AMQP
    /// URL's. Over https, `tls`'s CA certificates are trusted besides the
    /// platform's roots and its client certificate is presented.
    ///
    /// A plain `http://` base on another host than this one is refused when
    /// the AMQP URL is `amqps://`: the credentials would cross the network
    /// in clear.
    pub(crate) fn for_amqp_url_tls(
        amqp_url: &str,
        base: Option<&str>,
        tls: &TlsFiles,
    ) -> Result<Self> {
        let parsed = reqwest::Url::parse(amqp_url)
            .map_err(|e| OpsError::Invalid(format!("the AMQP URL is not a URL: {e}")))?;
        let secure = parsed.scheme() == "amqps";
        let host = parsed.host_str().unwrap_or("127.0.0.1").to_owned();
        let mut user = percent_decode(parsed.username());
        let mut password = percent_decode(parsed.password().unwrap_or("guest"));
        if user.is_empty() {
            user = "guest".to_owned();
        }
        let vhost = match parsed.path().trim_start_matches('/') {
            "" => "/".to_owned(),
            v => percent_decode(v),
        };
        let base = match base {
            Some(given) => {
                let mut url = reqwest::Url::parse(given.trim_end_matches('/')).map_err(|e| {
                    OpsError::Invalid(format!(
                        "the management URL `{}` is not a URL: {e}",
                        crate::redact_url(given)
                    ))
                })?;
                if !url.username().is_empty() {
                    user = percent_decode(url.username());
                    password = percent_decode(url.password().unwrap_or_default());
                    let _ = url.set_username("");
                    let _ = url.set_password(None);
                }
                match url.scheme() {
                    "https" => {}
                    "http" if secure && !is_local(&url) => {
                        return Err(OpsError::Invalid(format!(
                            "the management URL `{}` is plain http to another host while the \
                             AMQP URL is amqps://: the credentials would cross the network in \
                             clear; use https://",
                            url.as_str().trim_end_matches('/')
                        )));
                    }
                    "http" => {}
                    other => {
                        return Err(OpsError::Invalid(format!(
                            "the management URL must be http:// or https://, not `{other}://`"
                        )));
                    }
                }
                url.as_str().trim_end_matches('/').to_owned()
            }
            None if secure => format!("https://{}:{DEFAULT_TLS_PORT}", bracketed(&host)),
            None => format!("http://{}:{DEFAULT_PORT}", bracketed(&host)),
        };
        let builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(10));
        let http = tls
            .http(builder)?
            .build()
            .map_err(|e| OpsError::Invalid(format!("HTTP client: {e}")))?;
        Ok(Management {
            http,
            base,
            user,
            password,
            vhost,
        })
    }

    /// The base URL.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The vhost.
    pub(crate) fn vhost(&self) -> &str {
        &self.vhost
    }

    /// The user the API is called as.
    #[cfg(test)]
    pub(crate) fn user(&self) -> &str {
        &self.user
    }

    fn vhost_path(&self) -> String {
        percent_encode(&self.vhost)
    }

    /// `GET {base}/api/{path}` as JSON; `Ok(None)` on 404.
    ///
    /// A `GET` answered in the 5xx range is asked again, up to three times,
    /// after a pause of 0.1, 0.3, then 0.9 s: the
    /// broker answers 500 to a listing that meets a queue being declared
    /// or deleted at that moment, and the next listing succeeds.
    pub(crate) async fn get(&self, path: &str) -> Result<Option<Value>> {
        let mut pauses = SERVER_ERROR_PAUSES.iter();
        loop {
            let answer = self.get_once(path).await;
            match answer {
                Err(OpsError::Management { status, .. }) if status >= 500 => match pauses.next() {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return answer.map_err(asked_again),
                },
                answer => return answer,
            }
        }
    }

    /// Sends `request` (built on `{base}/api/{path}`) with the
    /// credentials; an unreachable API is [`OpsError::ManagementMissing`].
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        request
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .await
            .map_err(|e| OpsError::ManagementMissing {
                url: self.base.clone(),
                detail: root_cause(&e),
            })
    }

    /// The error of an answer with `status` to a request on `/api/{path}`.
    async fn refused(
        status: reqwest::StatusCode,
        path: &str,
        response: reqwest::Response,
    ) -> OpsError {
        let text = response.text().await.unwrap_or_default();
        OpsError::Management {
            status: status.as_u16(),
            path: format!("/api/{path}"),
            body: text.chars().take(200).collect(),
        }
    }

    /// One `GET {base}/api/{path}`.
    async fn get_once(&self, path: &str) -> Result<Option<Value>> {
        let url = format!("{}/api/{path}", self.base);
        let response = self.send(self.http.get(&url)).await?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(Self::refused(status, path, response).await);
        }
        let text = response.text().await.unwrap_or_default();
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| OpsError::ManagementMissing {
                url: self.base.clone(),
                detail: format!(
                    "the answer to /api/{path} is not JSON ({e}): is this the management API?"
                ),
            })
    }

    /// The queues of the vhost whose names match `regex` (all when `None`).
    pub(crate) async fn queues(&self, regex: Option<&str>) -> Result<Vec<QueueInfo>> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let mut path = format!("queues/{}?page={page}&page_size=500", self.vhost_path());
            if let Some(re) = regex {
                path.push_str("&use_regex=true&name=");
                path.push_str(&percent_encode(re));
            }
            let value = self.get(&path).await?.unwrap_or(Value::Null);
            let parsed: Page = serde_json::from_value(value).map_err(|e| OpsError::Management {
                status: 200,
                path,
                body: format!("unexpected queue listing: {e}"),
            })?;
            out.extend(parsed.items);
            if page >= parsed.page_count {
                return Ok(out);
            }
            page += 1;
        }
    }

    /// The consumers of the vhost, as the management API lists them (for a
    /// single-active-consumer queue, `active` marks the one delivered to).
    pub(crate) async fn consumers(&self) -> Result<Vec<Value>> {
        let path = format!("consumers/{}", self.vhost_path());
        Ok(match self.get(&path).await? {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// The connections of the vhost, as the management API lists them
    /// (`client_properties.connection_name` is the name a client gave).
    pub(crate) async fn connections(&self) -> Result<Vec<Value>> {
        let path = format!("vhosts/{}/connections", self.vhost_path());
        Ok(match self.get(&path).await? {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// One queue, or `None` when it does not exist.
    pub(crate) async fn queue(&self, name: &str) -> Result<Option<QueueInfo>> {
        let path = format!("queues/{}/{}", self.vhost_path(), percent_encode(name));
        match self.get(&path).await? {
            Some(value) => {
                serde_json::from_value(value)
                    .map(Some)
                    .map_err(|e| OpsError::Management {
                        status: 200,
                        path,
                        body: format!("unexpected queue: {e}"),
                    })
            }
            None => Ok(None),
        }
    }

    /// `PUT {base}/api/{path}` with `body` as JSON (never asked again).
    pub(crate) async fn put(&self, path: &str, body: &Value) -> Result<()> {
        let url = format!("{}/api/{path}", self.base);
        let response = self.send(self.http.put(&url).json(body)).await?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        Err(Self::refused(status, path, response).await)
    }

    /// Sets the policy `name` of this vhost (`PUT /api/policies/{vhost}/{name}`).
    pub(crate) async fn put_policy(&self, name: &str, policy: &Value) -> Result<()> {
        let path = format!("policies/{}/{}", self.vhost_path(), percent_encode(name));
        self.put(&path, policy).await
    }

    /// Removes the policy `name` of this vhost; `Ok` when it was not there.
    #[cfg(test)]
    pub(crate) async fn delete_policy(&self, name: &str) -> Result<()> {
        let path = format!("policies/{}/{}", self.vhost_path(), percent_encode(name));
        let url = format!("{}/api/{path}", self.base);
        let response = self.send(self.http.delete(&url)).await?;
        let status = response.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            return Ok(());
        }
        Err(Self::refused(status, &path, response).await)
    }

    /// `/api/overview`.
    pub(crate) async fn overview(&self) -> Result<Value> {
        Ok(self.get("overview").await?.unwrap_or(Value::Null))
    }

    /// `/api/nodes`.
    pub(crate) async fn nodes(&self) -> Result<Vec<Value>> {
        match self.get("nodes").await? {
            Some(Value::Array(nodes)) => Ok(nodes),
            _ => Ok(Vec::new()),
        }
    }

    /// `/api/vhosts/{vhost}`.
    pub(crate) async fn vhost_info(&self) -> Result<Option<Value>> {
        self.get(&format!("vhosts/{}", self.vhost_path())).await
    }

    /// `/api/deprecated-features`: each deprecated feature of the broker
    /// with its state (`permitted` or `denied`); `None` from a broker that
    /// has none to report (before RabbitMQ 3.13).
    pub(crate) async fn deprecated_features(&self) -> Result<Option<Vec<DeprecatedFeature>>> {
        match self.get("deprecated-features").await? {
            Some(list) => Ok(Some(serde_json::from_value(list).map_err(|e| {
                OpsError::Invalid(format!(
                    "the management API's list of deprecated features is not one: {e}"
                ))
            })?)),
            None => Ok(None),
        }
    }
}

/// A deprecated feature of the broker, as `/api/deprecated-features` lists
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub(crate) struct DeprecatedFeature {
    /// Its name, such as `transient_nonexcl_queues`.
    pub(crate) name: String,
    /// `permitted` (still works) or `denied` (refused).
    pub(crate) state: String,
}

impl DeprecatedFeature {
    /// Whether the broker refuses the feature.
    pub(crate) fn is_denied(&self) -> bool {
        self.state == "denied"
    }
}

/// Whether the URL names this machine.
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

/// An IPv6 literal in brackets, as a URL needs it.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_management_client_follows_the_amqp_url() {
        let m = Management::for_amqp_url("amqp://ops:p%40ss@rabbit.local:5672/%2f", None).unwrap();
        assert_eq!(m.base(), "http://rabbit.local:15672");
        assert_eq!(
            (m.user(), m.password.as_str(), m.vhost()),
            ("ops", "p@ss", "/")
        );
        let m = Management::for_amqp_url("amqp://h/prod", Some("https://mgmt:443/")).unwrap();
        assert_eq!(
            (m.base(), m.vhost(), m.user()),
            ("https://mgmt", "prod", "guest")
        );
    }

    #[test]
    fn the_management_api_follows_the_amqp_scheme() {
        let m = Management::for_amqp_url("amqps://ops:pw@rabbit.local/%2f", None).unwrap();
        assert_eq!(m.base(), "https://rabbit.local:15671");
        let m = Management::for_amqp_url("amqp://ops:pw@[::1]:5672/%2f", None).unwrap();
        assert_eq!(m.base(), "http://[::1]:15672");
    }

    #[test]
    fn credentials_in_the_management_url_are_used_and_never_shown() {
        let m = Management::for_amqp_url(
            "amqp://guest:guest@h/%2f",
            Some("http://admin:SECRETPASS@127.0.0.1:15672/"),
        )
        .unwrap();
        assert_eq!(m.base(), "http://127.0.0.1:15672");
        assert_eq!((m.user(), m.password.as_str()), ("admin", "SECRETPASS"));
        assert!(!format!("{m:?}").contains("SECRETPASS"));
        let bad = Management::for_amqp_url("amqp://h/%2f", Some("ht tp://u:SECRETPASS@h"))
            .unwrap_err()
            .to_string();
        assert!(!bad.contains("SECRETPASS"), "{bad}");
    }

    #[test]
    fn plain_http_to_another_host_is_refused_when_amqp_is_encrypted() {
        let refused =
            Management::for_amqp_url("amqps://u:p@rabbit/%2f", Some("http://rabbit:15672"))
                .unwrap_err()
                .to_string();
        assert!(refused.contains("https://"), "{refused}");
        assert!(!refused.contains("  "), "{refused}");
        // This machine, or plaintext AMQP anyway: allowed.
        Management::for_amqp_url("amqps://u:p@rabbit/%2f", Some("http://127.0.0.1:15672")).unwrap();
        Management::for_amqp_url("amqp://u:p@rabbit/%2f", Some("http://rabbit:15672")).unwrap();
        let ftp = Management::for_amqp_url("amqp://h/%2f", Some("ftp://h")).unwrap_err();
        assert!(ftp.to_string().contains("ftp"), "{ftp}");
    }

    #[test]
    fn names_are_percent_encoded_for_paths() {
        assert_eq!(percent_encode("/"), "%2F");
        assert_eq!(percent_encode("a.b-c_d"), "a.b-c_d");
        assert_eq!(percent_encode("^q\\.x$"), "%5Eq%5C.x%24");
        assert_eq!(percent_decode("%2f"), "/");
        assert_eq!(percent_decode("50%"), "50%");
    }

    /// A management API on this machine that answers each request with the
    /// next status of `statuses` (the last one from then on); returns its
    /// base URL and the count of requests it answered.
    async fn answering(
        statuses: &'static [u16],
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&asked);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let status = statuses[n.min(statuses.len() - 1)];
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let body = if status == 200 { "{\"ok\":true}" } else { "" };
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (base, asked)
    }

    #[tokio::test]
    async fn a_get_answered_500_is_asked_again_until_it_succeeds() {
        let (base, asked) = answering(&[500, 503, 200]).await;
        let m = Management::for_amqp_url("amqp://h/%2f", Some(&base)).unwrap();
        let got = m.get("overview").await.unwrap();
        assert_eq!(got, Some(serde_json::json!({"ok": true})));
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_get_still_answered_500_fails_saying_how_often_it_was_asked() {
        let (base, asked) = answering(&[500]).await;
        let m = Management::for_amqp_url("amqp://h/%2f", Some(&base)).unwrap();
        let failed = m.get("overview").await.unwrap_err().to_string();
        assert_eq!(
            asked.load(std::sync::atomic::Ordering::SeqCst),
            SERVER_ERROR_RETRIES + 1
        );
        assert!(failed.contains("500"), "{failed}");
        assert!(failed.contains("/api/overview"), "{failed}");
        assert!(failed.contains("4 times"), "{failed}");
    }

    #[tokio::test]
    async fn a_get_answered_401_or_404_is_not_asked_again() {
        let (base, asked) = answering(&[401]).await;
        let m = Management::for_amqp_url("amqp://h/%2f", Some(&base)).unwrap();
        let failed = m.get("overview").await.unwrap_err().to_string();
        assert!(failed.contains("401"), "{failed}");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        let (base, asked) = answering(&[404]).await;
        let m = Management::for_amqp_url("amqp://h/%2f", Some(&base)).unwrap();
        assert_eq!(m.get("queues/%2F/gone").await.unwrap(), None);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
