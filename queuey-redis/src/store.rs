//! The store itself.

mod limit;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::store::{Inserted, Store, StoreError, ttl_ms};
use redis::aio::ConnectionManager;
use redis::{ErrorKind, FromRedisValue, RedisError, Script, ServerErrorKind};

use crate::scripts::{EXTEND, INSERT, REMOVE};

/// A [`Store`] on Redis, shared by every producer and worker that opens
/// the same Redis. Cheap to clone: clones share one connection, which
/// pipelines the commands of concurrent callers.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) connection: ConnectionManager,
    pub(crate) prefix: Arc<str>,
    pub(crate) address: Arc<str>,
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
    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Runs one command on the shared connection.
    async fn call<T: FromRedisValue>(&self, command: redis::Cmd) -> Result<T, StoreError> {
        let mut connection = self.connection.clone();
        command
            .query_async(&mut connection)
            .await
            .map_err(store_error)
    }

    /// Runs `script` on `keys` (the prefix put before each) with `args`.
    async fn run<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: impl IntoIterator<Item = String>,
        args: &[String],
    ) -> Result<T, StoreError> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(self.key(&key));
        }
        for arg in args {
            invocation.arg(arg);
        }
        let mut connection = self.connection.clone();
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(store_error)
    }
}

/// A Redis error as a [`StoreError`]: a Redis that could not be reached (or
/// is loading, or has no master) is unavailable; a Redis that answered "no"
/// (an argument out of range, a read-only replica, out of memory, no
/// permission, a wrong password) refused the operation.
fn store_error(error: RedisError) -> StoreError {
    if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
    {
        return StoreError::unavailable(error);
    }
    match error.kind() {
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => StoreError::unavailable(error),
        ErrorKind::Server(_)
        | ErrorKind::Extension
        | ErrorKind::AuthenticationFailed
        | ErrorKind::UnexpectedReturnType
        | ErrorKind::Parse
        | ErrorKind::Client
        | ErrorKind::InvalidClientConfig => StoreError::refused(error),
        _ => StoreError::unavailable(error),
    }
}

impl Store for RedisStore {
    fn insert<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        async move {
            let args = [value.to_owned(), ttl_ms(ttl).to_string()];
            let held: Option<String> = self.run(&INSERT, [key.to_owned()], &args).await?;
            Ok(held.map_or(Inserted::New, Inserted::Exists))
        }
        .boxed()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let mut command = redis::cmd("GET");
        command.arg(self.key(key));
        async move { self.call(command).await }.boxed()
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut command = redis::cmd("SET");
        command
            .arg(self.key(key))
            .arg(value)
            .arg("PX")
            .arg(ttl_ms(ttl));
        async move { self.call(command).await }.boxed()
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let args = [value.to_owned(), ttl_ms(ttl).to_string()];
        async move { Ok(self.run::<i64>(&EXTEND, [key.to_owned()], &args).await? == 1) }.boxed()
    }

    fn remove<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let args = [value.to_owned()];
        async move { Ok(self.run::<i64>(&REMOVE, [key.to_owned()], &args).await? == 1) }.boxed()
    }
}
