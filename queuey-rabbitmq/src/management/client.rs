//! The HTTP client of one virtual host's management API.
//!
//! The credentials travel in a header, never in a URL, and every error
//! text is scrubbed of the password besides. A `GET` answered in the 5xx
//! range is asked again, up to three times: the broker answers 500 to a
//! listing that meets a queue being declared or deleted at that moment,
//! and the next listing succeeds.

use std::fmt;
use std::time::Duration;

use queuey_core::__private::root_cause;
use serde::Deserialize;
use serde_json::Value;

use super::endpoint::Endpoint;
use super::error::Error;
use super::queue::QueueInfo;
use crate::TlsOptions;

/// How long one request may take, connecting included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The pauses before each new ask of a `GET` answered in the 5xx range.
const SERVER_ERROR_PAUSES: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(300),
    Duration::from_millis(900),
];

/// The error of a `GET` still answered in the 5xx range after every new
/// ask, saying so.
fn asked_again(mut error: Error) -> Error {
    if let Error::Status { body, .. } = &mut error {
        let times = SERVER_ERROR_PAUSES.len() + 1;
        *body = match body.trim() {
            "" => format!("no explanation given, {times} times"),
            said => format!("{said} ({times} times)"),
        };
    }
    error
}

/// Queues asked for per page of a listing.
const PAGE_SIZE: u32 = 500;

/// A client of one virtual host's management API. Cheap to clone; clones
/// share their connections. Its `Debug` output masks the password.
///
/// ```no_run
/// # async fn run() -> Result<(), queuey_rabbitmq::management::Error> {
/// use queuey_rabbitmq::TlsOptions;
/// use queuey_rabbitmq::management::{Client, Endpoint};
///
/// let endpoint = Endpoint::new("amqp://app:secret@rabbit.internal/%2f", None)?;
/// let api = Client::new(endpoint, &TlsOptions::default())?;
/// for queue in api.queues(Some("\\.quorum\\.[0-9]+$")).await? {
///     println!("{}: {:?} job(s) past their delay", queue.name, queue.releasing());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    endpoint: Endpoint,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Page {
    items: Vec<QueueInfo>,
    page_count: u64,
}

impl Client {
    /// A client of `endpoint`, each request bounded by [`REQUEST_TIMEOUT`].
    ///
    /// Over https (which needs the `rustls` feature) the platform's roots
    /// are trusted, and so are `tls`'s CA certificates, and its client
    /// certificate, when it has one in PEM, is presented: one
    /// [`TlsOptions`] serves the AMQP connection and the API alike. Its
    /// [`server_name`](TlsOptions::server_name) is for AMQP only, and a
    /// PKCS #12 client certificate is refused here. Over http, `tls` is
    /// not read.
    pub fn new(endpoint: Endpoint, tls: &TlsOptions) -> Result<Client, Error> {
        let builder = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(REQUEST_TIMEOUT);
        let builder = if endpoint.is_https() {
            https(builder, &endpoint, tls)?
        } else {
            builder
        };
        let http = builder.build().map_err(|e| {
            Error::Setup(format!(
                "the HTTP client cannot be built: {}",
                root_cause(&e)
            ))
        })?;
        Ok(Client { http, endpoint })
    }

    /// Where the API is, and who reads it.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `GET {base}/api/{path}` as JSON; `Ok(None)` for a 404. A path in
    /// the virtual host comes from [`Endpoint::vhost_path`].
    pub async fn get(&self, path: &str) -> Result<Option<Value>, Error> {
        let mut pauses = SERVER_ERROR_PAUSES.iter();
        loop {
            let answer = self.get_once(path).await;
            match answer {
                Err(Error::Status { status, .. }) if status >= 500 => match pauses.next() {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return answer.map_err(asked_again),
                },
                answer => return answer,
            }
        }
    }

    /// `PUT {base}/api/{path}` with `body` as JSON (never asked again).
    pub async fn put(&self, path: &str, body: &Value) -> Result<(), Error> {
        let request = self
            .http
            .put(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_string());
        let response = self.send(path, request).await?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(self.refused(path, response).await);
        }
        Ok(())
    }

    /// `DELETE {base}/api/{path}`; `Ok(false)` when there was nothing to
    /// delete (404).
    pub async fn delete(&self, path: &str) -> Result<bool, Error> {
        let response = self.send(path, self.http.delete(self.url(path))).await?;
        Ok(response.status() != reqwest::StatusCode::NOT_FOUND)
    }

    /// The queues of the virtual host whose names match the regular
    /// expression `name_regex` (all when `None`), read 500 a page.
    pub async fn queues(&self, name_regex: Option<&str>) -> Result<Vec<QueueInfo>, Error> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let mut path = format!(
                "{}?page={page}&page_size={PAGE_SIZE}",
                self.endpoint.vhost_path("queues", &[])
            );
            if let Some(regex) = name_regex {
                path.push_str("&use_regex=true&name=");
                path.push_str(&queuey_core::uri::percent_encode(regex));
            }
            let value = self.get(&path).await?.unwrap_or(Value::Null);
            let parsed: Page =
                serde_json::from_value(value).map_err(|e| self.unexpected(&path, &e))?;
            out.extend(parsed.items);
            if page >= parsed.page_count {
                return Ok(out);
            }
            page += 1;
        }
    }

    /// One queue of the virtual host, or `None` when it does not exist.
    pub async fn queue(&self, name: &str) -> Result<Option<QueueInfo>, Error> {
        let path = self.endpoint.vhost_path("queues", &[name]);
        match self.get(&path).await? {
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(|e| self.unexpected(&path, &e)),
            None => Ok(None),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/{path}", self.endpoint.base())
    }

    /// One `GET {base}/api/{path}`.
    async fn get_once(&self, path: &str) -> Result<Option<Value>, Error> {
        let response = self.send(path, self.http.get(self.url(path))).await?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| Error::Unexpected {
                base: self.endpoint.base().to_owned(),
                path: format!("/api/{path}"),
                detail: format!("the answer is not JSON ({e})"),
            })
    }

    /// Sends `request` for `/api/{path}` with the credentials: its answer
    /// when that is a success or a 404, else the error of its status.
    async fn send(
        &self,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Error> {
        let response = request
            .basic_auth(self.endpoint.user(), Some(&self.endpoint.password))
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            return Ok(response);
        }
        Err(self.refused(path, response).await)
    }

    /// The error of an answer with an error status to `/api/{path}`.
    async fn refused(&self, path: &str, response: reqwest::Response) -> Error {
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        Error::Status {
            base: self.endpoint.base().to_owned(),
            status,
            path: format!("/api/{path}"),
            body: self.scrub(text.chars().take(200).collect()),
        }
    }

    fn unreachable(&self, e: &reqwest::Error) -> Error {
        Error::Unreachable {
            base: self.endpoint.base().to_owned(),
            detail: self.scrub(root_cause(e)),
        }
    }

    fn unexpected(&self, path: &str, e: &serde_json::Error) -> Error {
        Error::Unexpected {
            base: self.endpoint.base().to_owned(),
            path: format!("/api/{}", path.split('?').next().unwrap_or(path)),
            detail: format!("unexpected answer ({e})"),
        }
    }

    /// `text` without the password.
    fn scrub(&self, text: String) -> String {
        match self.endpoint.password.as_str() {
            "" => text,
            password => text.replace(password, "***"),
        }
    }
}

/// `builder` trusting `tls`'s CA certificates and presenting its client
/// certificate.
#[cfg(feature = "rustls")]
fn https(
    mut builder: reqwest::ClientBuilder,
    _endpoint: &Endpoint,
    tls: &TlsOptions,
) -> Result<reqwest::ClientBuilder, Error> {
    use lapin::tcp::OwnedIdentity;

    let loaded = tls.load().map_err(|e| Error::Setup(e.to_string()))?;
    if let Some(chain) = &loaded.config.cert_chain {
        let certificates = reqwest::Certificate::from_pem_bundle(chain.as_bytes())
            .map_err(|e| Error::Setup(format!("a TLS CA certificate is not usable: {e}")))?;
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    match loaded.config.identity {
        None => Ok(builder),
        Some(OwnedIdentity::PKCS8 { mut pem, key }) => {
            pem.push(b'\n');
            pem.extend(key);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                Error::Setup(format!(
                    "the TLS client certificate or its key is not usable: {e}"
                ))
            })?;
            Ok(builder.identity(identity))
        }
        Some(_) => Err(Error::Setup(
            "the management API is read over https with a PEM client certificate only, not a \
             PKCS #12 archive"
                .to_owned(),
        )),
    }
}

/// Without the `rustls` feature: no https.
#[cfg(not(feature = "rustls"))]
fn https(
    _builder: reqwest::ClientBuilder,
    endpoint: &Endpoint,
    _tls: &TlsOptions,
) -> Result<reqwest::ClientBuilder, Error> {
    Err(Error::Setup(format!(
        "the management API at {} is https, and this build reads it over https only with the \
         `rustls` feature",
        endpoint.base()
    )))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A management API on this machine that answers each request with the
    /// next status of `statuses` (the last one from then on); returns a
    /// client of it and the count of requests it answered.
    async fn answering(statuses: &'static [u16]) -> (Client, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&asked);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let status = statuses[n.min(statuses.len() - 1)];
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let body = match status {
                    200 => "{\"ok\":true}",
                    401 => "no SECRETPW here",
                    _ => "",
                };
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        let endpoint = Endpoint::new("amqp://app:SECRETPW@h/%2f", Some(&base)).unwrap();
        (
            Client::new(endpoint, &TlsOptions::default()).unwrap(),
            asked,
        )
    }

    #[tokio::test]
    async fn a_get_answered_500_is_asked_again_until_it_succeeds() {
        let (api, asked) = answering(&[500, 503, 200]).await;
        let got = api.get("overview").await.unwrap();
        assert_eq!(got, Some(serde_json::json!({"ok": true})));
        assert_eq!(asked.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_get_still_answered_500_fails_saying_how_often_it_was_asked() {
        let (api, asked) = answering(&[500]).await;
        let failed = api.get("overview").await.unwrap_err();
        assert_eq!(asked.load(Ordering::SeqCst), SERVER_ERROR_PAUSES.len() + 1);
        assert!(
            matches!(&failed, Error::Status { status: 500, path, body, .. }
                if path == "/api/overview" && body.contains("4 times")),
            "{failed:?}"
        );
    }

    #[tokio::test]
    async fn a_get_answered_401_or_404_is_not_asked_again_and_hides_the_password() {
        let (api, asked) = answering(&[401]).await;
        let failed = api.get("overview").await.unwrap_err();
        let said = format!("{failed} {failed:?} {api:?}");
        assert!(said.contains("401") && !said.contains("SECRETPW"), "{said}");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        let (api, asked) = answering(&[404]).await;
        assert_eq!(api.queue("gone").await.unwrap(), None);
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable_without_the_password() {
        let endpoint =
            Endpoint::new("amqp://app:SECRETPW@h/%2f", Some("http://127.0.0.1:9")).unwrap();
        let api = Client::new(endpoint, &TlsOptions::default()).unwrap();
        let failed = api.get("overview").await.unwrap_err();
        assert!(matches!(failed, Error::Unreachable { .. }), "{failed:?}");
        assert!(!failed.to_string().contains("SECRETPW"), "{failed}");
    }
}
