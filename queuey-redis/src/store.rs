//! The store itself.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::store::{Inserted, Store, StoreError, ttl_ms};
use redis::aio::ConnectionManager;

use crate::scripts::{EXTEND, INSERT, REMOVE};
use crate::{RedisStoreBuilder, RedisStoreError};

/// A [`Store`] on Redis, shared by every producer and worker that opens
/// the same Redis. Cheap to clone: clones share one connection, which
/// pipelines the commands of concurrent callers.
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    prefix: Arc<str>,
    address: Arc<str>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("address", &self.address)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://[:password@]host[:port][/db]`,
    /// `rediss://` for TLS when the `redis` crate is built with it) with the
    /// default options.
    pub async fn connect(url: &str) -> Result<RedisStore, RedisStoreError> {
        RedisStore::builder(url).connect().await
    }

    /// Options for a store at `url`.
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(url)
    }

    pub(crate) fn from_parts(
        connection: ConnectionManager,
        prefix: Arc<str>,
        address: Arc<str>,
    ) -> RedisStore {
        RedisStore {
            connection,
            prefix,
            address,
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

fn unavailable(error: redis::RedisError) -> StoreError {
    StoreError::unavailable(error)
}

impl Store for RedisStore {
    fn insert<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let held: Option<String> = INSERT
                .key(self.key(key))
                .arg(value)
                .arg(ttl_ms(ttl))
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok(held.map_or(Inserted::New, Inserted::Exists))
        }
        .boxed()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            redis::cmd("GET")
                .arg(self.key(key))
                .query_async(&mut connection)
                .await
                .map_err(unavailable)
        }
        .boxed()
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            redis::cmd("SET")
                .arg(self.key(key))
                .arg(value)
                .arg("PX")
                .arg(ttl_ms(ttl))
                .query_async::<()>(&mut connection)
                .await
                .map_err(unavailable)
        }
        .boxed()
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let done: i64 = EXTEND
                .key(self.key(key))
                .arg(value)
                .arg(ttl_ms(ttl))
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok(done == 1)
        }
        .boxed()
    }

    fn remove<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let done: i64 = REMOVE
                .key(self.key(key))
                .arg(value)
                .invoke_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok(done == 1)
        }
        .boxed()
    }
}
