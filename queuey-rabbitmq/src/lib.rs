//! The RabbitMQ backend of [queuey], on lapin 4.
//!
//! [`RabbitMqBackend`] implements [`queuey_core::Backend`]: it declares
//! queues, publishes jobs with publisher confirms, parks every wait in a
//! per-delay hold queue on the broker, and consumes queues as streams of
//! deliveries that are settled by publishing first and acknowledging last.
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), queuey_core::Error> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use futures::StreamExt;
//! use queuey_core::{Backend, Disposition, Envelope, QueueConfig};
//! use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};
//!
//! let url = std::env::var("AMQP_URL")
//!     .unwrap_or_else(|_| "amqp://guest:guest@localhost:5672/%2f".to_owned());
//! let backend = Arc::new(
//!     RabbitMqBackend::with_options(
//!         &url,
//!         RabbitMqOptions::default()
//!             .connection_name("emails-worker")
//!             .retry_granularity(Duration::from_secs(5)),
//!     )
//!     .await?,
//! );
//!
//! let emails = QueueConfig::new("app.emails").prefetch(16);
//! backend.declare(std::slice::from_ref(&emails)).await?;
//!
//! let payload = serde_json::value::to_raw_value(&serde_json::json!({"to": "a@example.com"}))
//!     .map_err(|source| queuey_core::Error::Encode { queue: "app.emails".into(), source })?;
//! backend.publish(&Envelope::new("send_email", "app.emails", payload)).await?;
//!
//! let mut deliveries = backend.consume(&emails).await?;
//! while let Some(delivery) = deliveries.next().await {
//!     let delivery = delivery?;
//!     // The backend builds the next attempt's envelope itself.
//!     let disposition = if delivery.envelope().attempt < 3 {
//!         Disposition::Retry { delay: Duration::from_secs(30) }
//!     } else {
//!         Disposition::DeadLetter { reason: "gave up after 3 attempts".into() }
//!     };
//!     delivery.settle(disposition).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Channels
//!
//! One backend is one AMQP connection; share it (behind an `Arc`) between
//! the producer and every worker of a process. On it:
//!
//! - [`publish_concurrency`](RabbitMqOptions::publish_concurrency) channels
//!   in confirm mode (8 by default) carry every publish: enqueues, retries,
//!   deferrals and dead letters. Each carries **one publish at a time**, from
//!   `basic.publish` to its confirmation, so a confirmation (and a returned
//!   message) is always matched with its own publish. Nothing is declared on
//!   them. A channel closed by a channel exception is reopened on next use.
//! - As many channels again (opened only once holds are used) declare hold
//!   queues, right before each publish into one, each carrying one
//!   declaration at a time, so concurrent retries and deferrals do not wait
//!   for each other's declarations. A refused declaration closes only its
//!   channel, which is reopened on next use. With `publish_concurrency(1)`
//!   there is one publishing channel and one hold-declaration channel.
//! - Each [`consume`](queuey_core::Backend::consume) opens a fresh channel
//!   and sets `basic_qos(prefetch, global = false)` before consuming.
//! - Each [`declare`](queuey_core::Backend::declare) runs on a throwaway
//!   channel, so a refused declaration cannot take the others down.
//!
//! # Reconnection
//!
//! A backend outlives its connection. When the connection dies (the broker
//! closed it, restarted or went silent for two heartbeats), the backend
//! connects again — trying each address given to
//! [`connect`](RabbitMqBackend::connect) in turn, backing off with jitter
//! ([`RabbitMqOptions::reconnect_delay`]) — and declares every queue it had
//! declared before anything else happens on the new connection. Meanwhile:
//!
//! - publishes wait for the new connection up to
//!   [`publish_timeout`](RabbitMqOptions::publish_timeout), then fail with
//!   [`TimedOut`](queuey_core::BackendErrorKind::TimedOut);
//! - consumer streams carry on, consuming again with the same prefetch on the
//!   new connection; a delivery taken on the old one can no longer be
//!   settled (its settle fails with
//!   [`NotSettled`](queuey_core::BackendErrorKind::NotSettled)) and the
//!   broker delivers it again;
//! - a queue deleted while the backend was away is declared again.
//!
//! The backend gives up only on what cannot heal — credentials or a virtual
//! host the broker refuses, a declared queue it now refuses, or a
//! [`reconnect_deadline`](RabbitMqOptions::reconnect_deadline) that passed —
//! after which every call fails with that reason.
//!
//! # Confirms
//!
//! Every publish goes to the default exchange, routing key = queue name,
//! `mandatory`, persistent, and waits for its confirmation. Only a bare ack
//! is success; the failures are [`Error::Backend`](queuey_core::Error::Backend)
//! errors reading
//! ``broker nacked the message published to `q` ``,
//! ``broker returned the message published to `q` as unroutable: 312 NO_ROUTE``
//! or
//! ``publisher confirms are not enabled; cannot confirm publish to `q` ``.
//!
//! # Topology and holds
//!
//! See [`topology`] for the queues and their arguments. A delay is rounded
//! up to the retry or deferral granularity and parked in the hold queue
//! `q{deferred_suffix}.{ttl_ms}`, whose only job is to dead-letter it back
//! onto `q` after its TTL. A hold needs the queue to have been declared
//! through the same backend in the same process
//! ([`Error::UnknownQueue`](queuey_core::Error::UnknownQueue) otherwise) and
//! a rounded delay of at most [`topology::MAX_DEFERRAL_MS`]
//! ([`Error::DelayTooLong`](queuey_core::Error::DelayTooLong) otherwise).
//!
//! # Feature flags
//!
//! None is on by default; plain `amqp://` needs none.
//!
//! | feature | effect |
//! |---|---|
//! | `rustls` | `amqps://` with rustls (aws-lc-rs provider, platform verifier) |
//! | `rustls-ring` | `amqps://` with rustls (ring provider, native root certificates) |
//! | `native-tls` | `amqps://` with the platform's TLS library |
//!
//! [queuey]: https://docs.rs/queuey

#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod consumer;
mod declare;
mod delivery;
mod error;
mod link;
mod options;
mod pool;
mod properties;
mod publisher;
pub mod topology;
mod uri;

pub use backend::{Addresses, RabbitMqBackend};
pub use delivery::REQUEUE_DELAY;
pub use options::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEARTBEAT, DEFAULT_PUBLISH_TIMEOUT,
    DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN, MAX_PUBLISH_CONCURRENCY,
    RabbitMqOptions,
};
