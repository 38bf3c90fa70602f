//! How a Redis store is opened.

use std::sync::Arc;
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
}

impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("url", &redact(&self.url))
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl RedisStoreBuilder {
    pub(crate) fn new(url: impl Into<String>) -> Self {
        RedisStoreBuilder {
            url: url.into(),
            prefix: String::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
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

    /// Connects, failing if Redis does not answer now.
    pub async fn connect(self) -> Result<RedisStore, RedisStoreError> {
        let (client, config, prefix, address) = self.parts()?;
        match ConnectionManager::new_with_config(client, config).await {
            Ok(connection) => Ok(RedisStore::from_parts(connection, prefix, address)),
            Err(error) => Err(RedisStoreError::Connect {
                reason: scrub(&error.to_string(), &self.url),
                url: address.to_string(),
            }),
        }
    }

    /// Opens the store without waiting for Redis: the first operation
    /// connects. A process that must start while Redis is down uses this;
    /// only a malformed URL fails here.
    pub fn open(self) -> Result<RedisStore, RedisStoreError> {
        let (client, config, prefix, address) = self.parts()?;
        match ConnectionManager::new_lazy_with_config(client, config) {
            Ok(connection) => Ok(RedisStore::from_parts(connection, prefix, address)),
            Err(error) => Err(RedisStoreError::Connect {
                reason: scrub(&error.to_string(), &self.url),
                url: address.to_string(),
            }),
        }
    }

    fn parts(
        &self,
    ) -> Result<(redis::Client, ConnectionManagerConfig, Arc<str>, Arc<str>), RedisStoreError> {
        let address: Arc<str> = redact(&self.url).into();
        let client = redis::Client::open(self.url.as_str()).map_err(|error| {
            RedisStoreError::InvalidUrl {
                url: address.to_string(),
                reason: scrub(&error.to_string(), &self.url),
            }
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_max_delay(Duration::from_secs(2));
        Ok((client, config, self.prefix.as_str().into(), address))
    }
}
