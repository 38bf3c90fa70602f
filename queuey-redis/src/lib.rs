//! A Redis [`Store`](queuey_core::store::Store) for queuey.
//!
//! RabbitMQ delivers every job at least once but cannot say whether a job
//! like this one is already waiting, nor whether a redelivered job already
//! ran. Unique jobs and jobs handled once ask a store shared by the whole
//! fleet; this crate is that store on Redis, with the atomic `SET … NX PX`
//! every key starts with and small server-side scripts for "extend or
//! remove, only if it still holds my value".
//!
//! It is also a [`LimitStore`](queuey_core::store::LimitStore): per-key
//! running slots with leases and turns to start under a rate, shared by
//! every worker of a fleet. Each limit operation is one Lua script on the
//! server's clock (Redis 5 or later), and every key it writes expires by
//! itself once idle (see `RedisStore`'s `LimitStore` implementation for the
//! keys and how long each lives).
//!
//! ```no_run
//! use std::time::Duration;
//! use queuey_core::store::{Inserted, Store};
//! use queuey_redis::RedisStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::builder("redis://127.0.0.1:6379")
//!     .prefix("billing:")
//!     .connect()
//!     .await?;
//! let ttl = Duration::from_secs(600);
//! if store.insert("unique:invoice:42", "job-a", ttl).await? == Inserted::New {
//!     println!("first of its kind");
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # TLS
//!
//! With the `rustls` feature, a `rediss://` URL connects over TLS (rustls,
//! the ring provider), checking the server's certificate against the
//! platform's roots, or against the authorities given to
//! `RedisStoreBuilder::tls_root_certificates`; a client certificate goes
//! with `RedisStoreBuilder::tls_client_certificate`. A `rediss://` URL
//! never falls back to plaintext, and without the feature it is refused
//! with an error naming the feature. Without TLS the Redis password (and
//! every key) crosses the network in clear: use `rediss://` whenever Redis
//! is not on the same host.
//!
//! ```toml
//! queuey-redis = { version = "0.1", features = ["rustls"] }
//! ```
//!
//! The connection reconnects by itself. While Redis cannot be reached every
//! operation fails fast with [`StoreError`](queuey_core::store::StoreError),
//! and queuey carries on without the store (see the guide's "Unique jobs"
//! and "Handled once").

#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod error;
mod limit_scripts;
mod scripts;
mod store;
#[cfg(feature = "rustls")]
mod tls;

pub use builder::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_RESPONSE_TIMEOUT, RedisStoreBuilder};
pub use error::RedisStoreError;
pub use store::RedisStore;

/// Whether `url` asks for TLS (`rediss://`), with or without this crate's
/// `rustls` feature.
pub(crate) fn is_tls(url: &str) -> bool {
    url.get(..9)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss://"))
}
