//! How a Redis store is opened.

use std::time::Duration;

use queuey_core::uri::{redact, scrub};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::{RedisStore, RedisStoreError};

/// How long one connection attempt may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long Redis may take to answer one command before the connection is
/// taken as broken and made again.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Options of a [`RedisStore`], from [`RedisStore::builder`].
#[derive(Clone)]
pub struct RedisStoreBuilder {
    url: String,
    prefix: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    #[cfg(feature = "rustls")]
    tls: crate::tls::TlsOptions,
}

impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "rustls")]
        let tls: &dyn std::fmt::Debug = &self.tls;
        #[cfg(not(feature = "rustls"))]
        let tls: &dyn std::fmt::Debug = &"not built (the `rustls` feature is off)";
        f.debug_struct("RedisStoreBuilder")
            .field("url", &redact(&self.url))
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("tls", tls)
            .finish()
    }
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://[:password@]host[:port][/db]`,
    /// or `rediss://` for TLS with this crate's `rustls` feature) with the
    /// default options.
    pub async fn connect(url: &str) -> Result<RedisStore, RedisStoreError> {
        RedisStore::builder(url).connect().await
    }

    /// Options for a store at `url`.
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(url)
    }
}

impl RedisStoreBuilder {
    pub(crate) fn new(url: impl Into<String>) -> Self {
        RedisStoreBuilder {
            url: url.into(),
            prefix: String::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            #[cfg(feature = "rustls")]
            tls: crate::tls::TlsOptions::default(),
        }
    }

    /// Puts `prefix` before every key, so that applications or
    /// environments sharing one Redis keep apart. None by default: queuey's
    /// own keys already start with `queuey:`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one connection attempt may take
    /// ([`DEFAULT_CONNECT_TIMEOUT`] by default).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command may take before the connection is made again
    /// ([`DEFAULT_RESPONSE_TIMEOUT`] by default). Callers in queuey bound
    /// each call more tightly on their side and go on without the store.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Trusts the certificate authorities in `pem` (one or more PEM
    /// certificates) for a `rediss://` URL, instead of the platform's
    /// roots: for a Redis whose certificate a private authority signed.
    #[cfg(feature = "rustls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_certificates = Some(pem.into());
        self
    }

    /// Presents this client certificate and its private key (both PEM) to
    /// a Redis that asks for one (`tls-auth-clients yes`).
    #[cfg(feature = "rustls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
    pub fn tls_client_certificate(
        mut self,
        certificate_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((certificate_pem.into(), key_pem.into()));
        self
    }

    /// Connects, failing if Redis does not answer now.
    pub async fn connect(self) -> Result<RedisStore, RedisStoreError> {
        let (client, config) = self.parts()?;
        self.store(ConnectionManager::new_with_config(client, config).await)
    }

    /// Opens the store without waiting for Redis: the first operation
    /// connects. A process that must start while Redis is down uses this;
    /// only a malformed URL fails here.
    pub fn open(self) -> Result<RedisStore, RedisStoreError> {
        let (client, config) = self.parts()?;
        self.store(ConnectionManager::new_lazy_with_config(client, config))
    }

    /// The store on `connection`, or why Redis did not answer.
    fn store(
        &self,
        connection: redis::RedisResult<ConnectionManager>,
    ) -> Result<RedisStore, RedisStoreError> {
        match connection {
            Ok(connection) => Ok(RedisStore {
                connection,
                prefix: self.prefix.as_str().into(),
                address: redact(&self.url).into(),
            }),
            Err(error) => Err(RedisStoreError::Connect {
                reason: scrub(&error.to_string(), &self.url),
                url: redact(&self.url),
            }),
        }
    }

    fn parts(&self) -> Result<(redis::Client, ConnectionManagerConfig), RedisStoreError> {
        let invalid = |reason: String| RedisStoreError::InvalidUrl {
            url: redact(&self.url),
            reason,
        };
        let client = self
            .client()
            .map_err(|error| invalid(scrub(&error.to_string(), &self.url)))?
            .map_err(invalid)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_max_delay(Duration::from_secs(2));
        Ok((client, config))
    }

    /// The client for the URL: TLS for `rediss://` (with the `rustls`
    /// feature), plain otherwise. The outer error is Redis's; the inner one
    /// says what to change when the URL and the TLS settings disagree.
    #[cfg(feature = "rustls")]
    fn client(&self) -> redis::RedisResult<Result<redis::Client, String>> {
        crate::tls::client(&self.url, &self.tls)
    }

    #[cfg(not(feature = "rustls"))]
    fn client(&self) -> redis::RedisResult<Result<redis::Client, String>> {
        if crate::is_tls(&self.url) {
            return Ok(Err(
                "`rediss://` (Redis over TLS) needs the `rustls` feature of queuey-redis: \
                 enable it in Cargo.toml (`queuey-redis = { features = [\"rustls\"] }`)"
                    .to_owned(),
            ));
        }
        redis::Client::open(self.url.as_str()).map(Ok)
    }
}
