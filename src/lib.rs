//! queuey: typed background jobs on RabbitMQ, processed by a
//! `tower::Service` stack.
//!
//! This facade re-exports the pieces an application needs:
//!
//! - the model from [`queuey_core`]: [`Queues`], [`Job`], [`JobHandler`],
//!   [`JobContext`], [`JobError`], [`Producer`], [`Backend`], [`Delivery`],
//!   [`MemoryBackend`] and [`Error`];
//! - the derive macros `#[derive(Queues)]` and `#[derive(Job)]`.
//!
//! ```
//! use queuey::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! #[queues(prefix = "app")]
//! enum AppQueues {
//!     Emails,
//! }
//!
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = AppQueues::Emails)]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! assert_eq!(SendEmail::QUEUE.name(), "app.emails");
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the derive macros name this crate as `::queuey` from inside it.
#[allow(unused_extern_crates)]
extern crate self as queuey;

#[doc(inline)]
pub use queuey_core::{
    Backend, BackendError, BackendErrorKind, Backoff, BoxError, Delivery, DeliveryStream,
    EnqueueOptions, Envelope, Error, ExponentialBackoff, FnHandler, Job, JobContext, JobError,
    JobHandler, MAX_DEFERRAL_MS, MemoryBackend, Producer, QueueConfig, Queues, RetryPolicy,
    handler_fn,
};

pub use queuey_core::{backend, handler, memory, queue, retry};

/// The RabbitMQ backend.
#[cfg(feature = "rabbitmq")]
pub use queuey_rabbitmq as rabbitmq;

#[cfg(feature = "rabbitmq")]
#[doc(inline)]
pub use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

/// The names a typical application needs: `use queuey::prelude::*;`.
pub mod prelude {
    pub use queuey_core::{
        Backend, Backoff, EnqueueOptions, Error, Job, JobContext, JobError, JobHandler,
        MemoryBackend, Producer, QueueConfig, Queues, RetryPolicy, handler_fn,
    };
}

/// What the derive macros expand to; not a public API.
#[doc(hidden)]
pub use queuey_core as __core;
