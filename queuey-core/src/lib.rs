//! The model of [queuey]: typed jobs on queues, the envelopes they travel in,
//! handlers that run them, the [`Backend`](backend::Backend) and [`Delivery`](backend::Delivery) traits a broker
//! implements, the [`Producer`] that enqueues jobs, and [`MemoryBackend`](memory::MemoryBackend), an
//! in-process backend with the broker's semantics.
//!
//! Most applications use the `queuey` facade crate, which re-exports all of
//! this together with the worker and the RabbitMQ backend.
//!
//! # Overview
//!
//! - A [`Queues`] set (an enum, `#[derive(Queues)]`) names an application's
//!   queues and their [`QueueConfig`]s.
//! - A [`Job`] (`#[derive(Job)]`) is a serializable type bound to one queue of
//!   one set, so it cannot be enqueued onto another set's queues.
//! - A [`JobHandler`] runs jobs of one type and answers with a [`JobError`]
//!   when a job should be retried, dead-lettered or deferred.
//! - A [`Producer`] enqueues jobs now, after a delay, or as a deferral.
//! - A [`Namespace`] chosen at run time (one per tenant, say) prefixes every
//!   queue name of a set for the producers and workers built with it.
//! - Every wait is a *hold* on the broker, rounded up to a granularity and
//!   never released early, capped at [`MAX_DEFERRAL_MS`].
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use queuey_core::backend::Backend;
//! use queuey_core::{Job, Producer, Queues};
//! use queuey_core::memory::MemoryBackend;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! #[queues(prefix = "app")]
//! enum AppQueues {
//!     #[queue(prefetch = 8)]
//!     Emails,
//! }
//!
//! #[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
//! #[job(queue = AppQueues::Emails, name = "send_email")]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! let backend = Arc::new(MemoryBackend::new());
//! let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
//! let id = producer.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
//!
//! let mut deliveries = backend.consume(&AppQueues::Emails.config()).await?;
//! let delivery = deliveries.next().await.unwrap()?;
//! assert_eq!(delivery.envelope().job_id, id);
//! let job: SendEmail = delivery.envelope().payload_as()?;
//! assert_eq!(job.to, "a@example.com");
//! delivery.ack().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Supported Rust versions
//!
//! The minimum supported Rust version is 1.88, the same as lapin 4's.
//!
//! [queuey]: https://docs.rs/queuey

#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the derive macros name this crate as `::queuey_core` from inside it.
#[allow(unused_extern_crates)]
extern crate self as queuey_core;

pub mod backend;
mod clock;
pub mod control;
mod envelope;
mod error;
pub mod escape;
mod handler;
mod job;
mod local_port;
mod macros;
pub mod memory;
pub mod periodic;
mod producer;
mod queue;
mod retry;
pub mod store;
pub mod trace_context;
mod unique;
pub mod uri;
mod wait;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub use backend::disposition::Disposition;
pub use envelope::{
    AttemptError, DecodeError, Envelope, IN_PLACE_PAYLOAD_BYTES, MAX_ERROR_BYTES,
    MAX_MESSAGE_BYTES, MAX_RECORDED_ERRORS,
};
pub use error::{BackendError, BackendErrorKind, BoxError, Error};
pub use handler::{
    DeferredError, FatalError, FnHandler, JobContext, JobError, JobHandler, RetryableError,
    handler_fn,
};
pub use job::{Job, Limits};
pub use producer::{EnqueueOptions, JobWatch, Producer, ProducerBuilder, WaitError};
pub use queue::shard;
pub use queue::{MAX_QUEUE_NAME_BYTES, Namespace, QueueConfig, QueueSettings, QueueType, Queues};
pub use retry::{Backoff, ExponentialBackoff, InvalidBackoff, InvalidRetryPolicy, RetryPolicy};
pub use unique::Unique;
/// Job ids are UUIDs (version 4).
pub use uuid::Uuid;
pub use wait::{LONGEST_WAIT, MAX_DEFERRAL_MS};

pub(crate) use macros::{forward_to_shared, getters, setters};

/// Locks `mutex`, poisoned or not: a panic while holding one of this crate's
/// locks cannot leave what it guards half updated in a way that matters more
/// than refusing all further work.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `#[derive(Queues)]` and `#[derive(Job)]`.
pub use queuey_macros::{Job, Queues};

/// Re-exports for code the derive macros generate and for the other queuey
/// crates; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::clock::now_ms;
    pub use crate::error::root_cause;
    pub use crate::local_port::free_local_port;
    pub use crate::store::throttle::Throttle;
    pub use crate::unique::release as release_unique;
    pub use std::time::Duration;
}
