//! queuey: typed background jobs on RabbitMQ, processed by a
//! [`tower::Service`](https://docs.rs/tower) stack.
//!
//! Producers enqueue typed jobs now, after a delay, or with a priority.
//! Workers run each job through composable layers — retries with
//! exponential backoff, `Retry-After` deferrals that spend no attempt and
//! come back ahead of the backlog, dead-lettering, timeouts, tracing and
//! metrics — and settle the outcome on the broker. Every wait is parked on
//! the broker in a per-delay hold queue: a crashed process loses nothing and
//! no job is released early. Delivery is at-least-once.
//!
//! # Quick start
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use queuey::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! // The application's queues. `app.emails` retries twice, 100 ms apart.
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! #[queues(prefix = "app")]
//! enum AppQueues {
//!     #[queue(retry(max_attempts = 3, backoff = "fixed", delay = "100ms"))]
//!     Emails,
//! }
//!
//! // A job bound to one queue of that set.
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = AppQueues::Emails, name = "send_email")]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! struct EmailHandler;
//!
//! impl JobHandler for EmailHandler {
//!     type Job = SendEmail;
//!
//!     async fn handle(&self, job: SendEmail, ctx: JobContext) -> Result<(), JobError> {
//!         if ctx.attempt() == 1 {
//!             return Err(JobError::retryable("the mail server is busy"));
//!         }
//!         println!("sent to {} on attempt {}", job.to, ctx.attempt());
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // `RabbitMqBackend::connect(url)` in production; the in-memory backend
//! // has the same semantics and needs no broker.
//! let backend = Arc::new(MemoryBackend::new());
//!
//! let worker = Worker::<AppQueues, _>::builder(backend.clone())
//!     .handler(EmailHandler)
//!     .build()
//!     .await?;
//! let handle = worker.handle();
//! let running = tokio::spawn(worker.run());
//!
//! let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
//! producer.enqueue(&SendEmail { to: "ada@example.com".into() }).await?;
//!
//! while handle.jobs_finished() < 1 {
//!     tokio::time::sleep(Duration::from_millis(20)).await;
//! }
//! handle.shutdown();
//! running.await??;
//! # Ok(())
//! # }
//! ```
//!
//! The [`guide`] walks through typed jobs, the worker and its default stack,
//! composing a stack from tower middleware, classification, retries and
//! deferrals, dead letters, the RabbitMQ topology and options, what queuey
//! guarantees, periodic jobs, metrics and tracing, and testing handlers.
//!
//! # Where things are
//!
//! Each name has one path. The root holds what a first job needs: the
//! [`Job`] and [`Queues`] traits and derives, [`JobHandler`], [`handler_fn`],
//! [`JobContext`] and [`JobError`], the [`Producer`] and its
//! [`EnqueueOptions`], the [`Worker`], tower's [`ServiceBuilder`], the
//! [`Error`] of producing and backends, and [`shutdown_signal`]. The rest
//! is in modules:
//!
//! | path | what it holds |
//! |---|---|
//! | [`job`] | the envelope a job travels in, job ids, unique keys, message size limits |
//! | [`handler`] | the tower service a handler becomes, the request and disposition of a stack, the causes a [`JobError`] carries |
//! | [`producer`] | the producer's builder, the watch of a job's progress, the error of waiting for a result |
//! | [`worker`] | the worker's builder, handle, error, default stack and timeouts |
//! | [`queue`] | queue configuration, settings, types, namespaces and limits |
//! | [`retry`] | retry policies and backoffs |
//! | [`layers`] | the tower layers of a job's stack, one module each |
//! | [`backend`] | the [`Backend`](backend::Backend) and [`Delivery`](backend::Delivery) traits and backend errors, for implementing a backend |
//! | [`memory`] | the in-process backend, with the broker's semantics |
//! | [`rabbitmq`] | the RabbitMQ backend, its options, topology and wire names |
//! | [`control`] | cancelling jobs, pausing queues, and each worker's heartbeat |
//! | [`shard`] | sharded queues: one logical queue over several broker queues |
//! | [`periodic`] | periodic jobs and who fires each tick |
//! | [`trace_context`] | W3C trace context carried in job headers |
//! | [`store`] | keys shared by a fleet: the store trait, an in-process store, the Redis store |
//! | [`testing`] | running a worker on the memory backend until idle, and the report of what happened |
//! | [`prelude`] | the names most applications need, for `use queuey::prelude::*` |
//!
//! The facade re-exports five crates: `queuey-core` (the model, the
//! producer, the in-memory backend), `queuey-macros` (the derives),
//! `queuey-tower` (the worker and its layers), `queuey-rabbitmq` and
//! `queuey-redis`.
//!
//! # Feature flags
//!
//! | feature | default | enables |
//! |---|---|---|
//! | `rabbitmq` | yes | the RabbitMQ backend |
//! | `rustls` | yes | `amqps://` through rustls (ring provider, the platform's roots) |
//! | `rustls-aws-lc` | no | `amqps://` through rustls with the aws-lc-rs provider |
//! | `native-tls` | no | `amqps://` through the platform's TLS library |
//! | `fleet` | yes | control commands, heartbeats and leadership for periodic jobs on RabbitMQ |
//! | `cron` | yes | cron schedules with seconds and time zones for periodic jobs |
//! | `management` | no | a client of the RabbitMQ management API (`queuey::rabbitmq::management`), which the backend then asks before it prunes an idle quorum hold queue |
//! | `opentelemetry` | no | W3C trace context from producer to handler |
//! | `redis` | no | the Redis store, for unique jobs and jobs handled once across a fleet |
//!
//! `rabbitmq` alone has no TLS library. Without any TLS feature, `amqps://`
//! addresses are refused (never dialled in plaintext).
//!
//! # Beyond this crate
//!
//! Jobs travel as JSON envelopes whose format is a versioned contract, so
//! services in other languages can enqueue jobs and read dead letters: see
//! `docs/wire-format.md` in the repository. The `queuey` command and its web
//! dashboard (the `queuey-ops` package) list, group and redrive dead
//! letters, count hold queues and check the topology.

#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the derive macros name this crate as `::queuey` from inside it.
#[allow(unused_extern_crates)]
extern crate self as queuey;

#[doc(inline)]
pub use queuey_core::{
    EnqueueOptions, Error, Job, JobContext, JobError, JobHandler, Producer, Queues, handler_fn,
};

#[doc(inline)]
pub use queuey_tower::{ServiceBuilder, Worker, shutdown_signal};

#[doc(inline)]
pub use queuey_core::{control, memory, shard, trace_context};

/// A job as data: the [`Envelope`](job::Envelope) it travels in and the
/// [`DecodeError`](job::DecodeError) of one that cannot be read, the
/// [`Uuid`](job::Uuid) that identifies it, the [`Unique`](job::Unique) key
/// that keeps a second copy from waiting beside it, and the size limits of
/// its message. The [`Job`] trait and derive themselves are at the root.
pub mod job {
    #[doc(inline)]
    pub use queuey_core::{
        DecodeError, Envelope, IN_PLACE_PAYLOAD_BYTES, MAX_MESSAGE_BYTES, Unique, Uuid,
    };
}

/// What a handler becomes inside a worker, for writing handlers and tower
/// services by hand: [`handler_fn`]'s [`FnHandler`](handler::FnHandler),
/// the [`HandlerService`](handler::HandlerService) that adapts a
/// [`JobHandler`] to a tower service (through
/// [`HandlerExt::into_service`](handler::HandlerExt::into_service)), the
/// [`JobRequest`](handler::JobRequest) a stack receives, the
/// [`Disposition`](handler::Disposition) it answers with and its
/// [`BoxError`](handler::BoxError), the causes a [`JobError`] carries
/// ([`RetryableError`](handler::RetryableError),
/// [`FatalError`](handler::FatalError), [`DeferredError`](handler::DeferredError)),
/// and the [`HandlerPanicked`](handler::HandlerPanicked) error of a handler
/// that panicked.
pub mod handler {
    #[doc(inline)]
    pub use queuey_core::{
        BoxError, DeferredError, Disposition, FatalError, FnHandler, RetryableError,
    };
    #[doc(inline)]
    pub use queuey_tower::{
        HandlerExt, HandlerFuture, HandlerPanicked, HandlerService, JobRequest,
    };
}

/// Building a [`Producer`] with a [`Namespace`](queue::Namespace) or a
/// store ([`ProducerBuilder`](producer::ProducerBuilder)), the
/// [`JobWatch`](producer::JobWatch) of a caller that follows a job's
/// progress, and the [`WaitError`](producer::WaitError) of a caller that
/// waits for a job's result. The [`Producer`] and its [`EnqueueOptions`]
/// are at the root.
pub mod producer {
    #[doc(inline)]
    pub use queuey_core::{JobWatch, ProducerBuilder, WaitError};
}

/// Configuring and running a [`Worker`]: its
/// [`WorkerBuilder`](worker::WorkerBuilder), the
/// [`WorkerHandle`](worker::WorkerHandle) that watches and stops it, its
/// [`WorkerError`](worker::WorkerError), the
/// [`DefaultStack`](worker::DefaultStack) it puts around each handler and
/// the [`Defaults`](worker::Defaults) trait a builder's default stack
/// implements, the [`Handlers`](worker::Handlers) its builder collects,
/// its default job and shutdown timeouts, and the largest weight a tenant
/// can have.
pub mod worker {
    #[doc(inline)]
    pub use queuey_tower::{
        DEFAULT_JOB_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, DefaultStack, Defaults, Handlers,
        MAX_TENANT_WEIGHT, WorkerBuilder, WorkerError, WorkerHandle,
    };
}

/// Queues and their settings: the [`QueueConfig`](queue::QueueConfig) of
/// each queue of a [`Queues`] set and the
/// [`QueueSettings`](queue::QueueSettings) it reads back as, the [`QueueType`](queue::QueueType), the
/// [`Namespace`](queue::Namespace) that prefixes a set's queue names at run
/// time, and the limits: how long a queue name may be, and how long a hold
/// keeps a job waiting ([`LONGEST_WAIT`](queue::LONGEST_WAIT),
/// [`MAX_DEFERRAL_MS`](queue::MAX_DEFERRAL_MS)).
pub mod queue {
    #[doc(inline)]
    pub use queuey_core::{
        LONGEST_WAIT, MAX_DEFERRAL_MS, MAX_QUEUE_NAME_BYTES, Namespace, QueueConfig, QueueSettings,
        QueueType,
    };
}

/// Retry policies: a [`RetryPolicy`](retry::RetryPolicy) (how many
/// attempts, and the [`Backoff`](retry::Backoff) between them, such as an
/// [`ExponentialBackoff`](retry::ExponentialBackoff)) and the errors of one
/// that cannot be built. The layer that applies them is
/// [`layers::retry`].
pub mod retry {
    #[doc(inline)]
    pub use queuey_core::{
        Backoff, ExponentialBackoff, InvalidBackoff, InvalidRetryPolicy, RetryPolicy,
    };
}

/// The contract between queuey and a message broker, for implementing or
/// driving a backend: the [`Backend`](backend::Backend) and
/// [`Delivery`](backend::Delivery) traits, the capability traits a backend
/// may add, hold granularities, and the
/// [`BackendError`](backend::BackendError) a backend reports, with its
/// [`BackendErrorKind`](backend::BackendErrorKind). See
/// [`queuey_core::backend`] for the contract in full.
pub mod backend {
    #[doc(inline)]
    pub use queuey_core::backend::*;
    #[doc(inline)]
    pub use queuey_core::{BackendError, BackendErrorKind};
}

/// The tower layers of a job's stack, one module each: the layer, its
/// service, its future and the names it reports under.
///
/// The [`DefaultStack`](worker::DefaultStack) is, from the outside in:
/// trace, metrics, dead-letter, deadline, retry and deferral layers, then
/// the job timeout around the handler. Add layers of your own around one
/// handler with [`WorkerBuilder::handler_with`](worker::WorkerBuilder::handler_with).
/// [`limit`](layers::limit) keeps per-key limits shared by a fleet (at
/// most K jobs of a key at once, at most N starting per period); a worker
/// given a [`LimitStore`](store::LimitStore) with
/// [`WorkerBuilder::limit_store`](worker::WorkerBuilder::limit_store)
/// applies the limits a job type declares with `#[job(limit(..))]` by
/// itself. See the guide's [Per-key limits](guide#per-key-limits).
pub mod layers {
    #[doc(inline)]
    pub use queuey_tower::{
        classify, cooldown, dead_letter, deadline, defer, idempotency, limit, metrics, retry, trace,
    };
}

/// Periodic jobs: [`Schedule`](periodic::Schedule)s, [`Periodic`](periodic::Periodic)
/// declarations, the [`Scheduler`](periodic::Scheduler) and how a fleet
/// agrees on who fires each tick ([`Leadership`](periodic::Leadership)).
/// See [`queuey_tower::periodic`] and [`queuey_core::periodic`].
pub mod periodic {
    pub use queuey_core::periodic::*;
    pub use queuey_tower::periodic::*;
}

/// Keys shared by a fleet's producers and workers: the [`Store`](store::Store)
/// trait, the in-process [`MemoryStore`](store::MemoryStore), and with the
/// `redis` feature the `RedisStore`.
pub mod store {
    pub use queuey_core::store::*;

    #[cfg(feature = "redis")]
    #[doc(inline)]
    pub use queuey_redis::{RedisStore, RedisStoreBuilder, RedisStoreError};
}

/// Testing handlers: [`run_until_idle`](testing::run_until_idle) and
/// [`TestRun`](testing::TestRun) run a [`Worker`] on the
/// [`MemoryBackend`](memory::MemoryBackend) until it has nothing left to
/// do and hand back a [`Report`](testing::Report) of every retry,
/// deferral and dead letter. See the guide's chapter
/// [Testing your handlers](guide#testing-your-handlers).
pub mod testing {
    #[doc(inline)]
    pub use queuey_tower::testing::*;
}

/// The RabbitMQ backend.
#[cfg(feature = "rabbitmq")]
pub use queuey_rabbitmq as rabbitmq;

/// The names an application that enqueues and works jobs needs:
/// `use queuey::prelude::*;`.
pub mod prelude {
    pub use queuey_core::memory::MemoryBackend;
    pub use queuey_core::{Job, JobContext, JobError, JobHandler, Producer, Queues, handler_fn};
    pub use queuey_tower::defer::DeferOn429;
    pub use queuey_tower::retry::RetryLayer;
    pub use queuey_tower::{ServiceBuilder, Worker};

    #[cfg(feature = "rabbitmq")]
    pub use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};
}

#[doc = include_str!("../docs/guide.md")]
pub mod guide {}

/// What the derive macros expand to; not a public API.
#[doc(hidden)]
pub use queuey_core as __core;
