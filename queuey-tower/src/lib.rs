//! The queuey worker: jobs run through a [`tower::Service`] stack.
//!
//! A worker consumes the queues of a queue set, decodes each delivery into a
//! [`JobRequest`] (the typed job and its [`JobContext`](queuey_core::JobContext)),
//! runs it through a stack of layers around the job's
//! [`JobHandler`](queuey_core::JobHandler), and settles the
//! [`Disposition`](queuey_core::Disposition) the stack answers with on the broker.
//!
//! The layers make no broker calls, so each can be tested alone, and any
//! tower middleware fits between them:
//!
//! | layer | turns | into |
//! |---|---|---|
//! | [`RetryLayer`](struct@retry::RetryLayer) | a transient failure | `Retry { delay }` while attempts are left, else `DeadLetter` |
//! | [`DeferOn429`](struct@defer::DeferOn429) | a `Retry-After` | `Defer { delay }`, spending no attempt |
//! | [`DeadLetterLayer`](dead_letter::DeadLetterLayer) | any failure (a wait: a deferral) | `DeadLetter { reason }` |
//! | [`DeadlineLayer`](deadline::DeadlineLayer) | a job past its deadline | `DeadLetter { reason }`, instead of running, retrying or deferring it |
//! | [`CooldownLayer`](cooldown::CooldownLayer) | a deferral of one job of a key | deferrals of that key's other jobs for the time left, without calling the handler |
//! | [`LimitLayer`](limit::LimitLayer) | a job whose key is at its concurrency or rate limit, across the fleet | `Defer { delay }` until its turn or a free slot, without calling the handler |
//! | [`IdempotencyLayer`](idempotency::IdempotencyLayer) | a delivery of a job that already ran | `Ack`, without calling the handler again |
//! | [`MetricsLayer`](metrics::MetricsLayer) | – | counters, a histogram and a gauge per queue and job type |
//! | [`TraceLayer`](trace::TraceLayer) | – | a span per job and an event per outcome |
//!
//! One classifier per stack ([`classify`]) decides what an error means
//! (transient, fatal, or a `Retry-After`) for every layer at once: queuey's
//! own errors, tower's timeout and load shed, and through a closure of
//! yours, anything else.
//!
//! `ServiceBuilder::new().layer(RetryLayer::new(policy)).layer(DeferOn429::new())`
//! is a layer like any other: give it to a worker with a handler, around the
//! handler inside the default stack ([`WorkerBuilder::handler_with`]) or
//! instead of it ([`WorkerBuilder::handler_without_default_stack`]);
//! [`Worker`] shows each shape.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use queuey_core::{Job, JobContext, JobError, JobHandler, Producer, Queues};
//! use queuey_core::memory::MemoryBackend;
//! use queuey_tower::Worker;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! #[queues(prefix = "app")]
//! enum AppQueues {
//!     Webhooks,
//! }
//!
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = AppQueues::Webhooks)]
//! struct CallWebhook {
//!     url: String,
//! }
//!
//! struct WebhookHandler;
//! impl JobHandler for WebhookHandler {
//!     type Job = CallWebhook;
//!     async fn handle(&self, job: CallWebhook, ctx: JobContext) -> Result<(), JobError> {
//!         if ctx.deferrals() == 0 {
//!             // The endpoint answered 429 with Retry-After: 2.
//!             return Err(JobError::deferred_msg(Duration::from_secs(2), "429 from endpoint"));
//!         }
//!         println!("called {}", job.url);
//!         Ok(())
//!     }
//! }
//!
//! let backend = Arc::new(MemoryBackend::new());
//! // No `.layer(..)`: the default stack (trace, metrics, dead-letter,
//! // deadline, retry, deferral, timeout) goes around the handler.
//! let worker = Worker::<AppQueues, _>::builder(backend.clone())
//!     .handler(WebhookHandler)
//!     .build()
//!     .await?;
//! let handle = worker.handle();
//! let running = tokio::spawn(worker.run());
//!
//! let producer = Producer::<AppQueues, _>::new(backend).await?;
//! producer.enqueue(&CallWebhook { url: "https://example.com/hook".into() }).await?;
//! while handle.jobs_finished() < 1 {
//!     tokio::time::sleep(Duration::from_millis(50)).await;
//! }
//! handle.shutdown();
//! running.await??;
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod macros;

mod classifier;
pub mod classify;
pub mod cooldown;
pub mod dead_letter;
pub mod deadline;
pub mod defer;
mod failure_slot;
mod handler;
pub mod idempotency;
mod job_fields;
mod leased;
pub mod limit;
pub mod metrics;
pub mod periodic;
mod reply_slot;
mod request;
pub mod retry;
mod signal;
pub mod testing;
pub mod trace;
mod worker;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) use macros::{disposition_future, disposition_service, inner_accessors, plain_layer};

/// Locks `mutex`, poisoned or not: nothing this crate guards with one is
/// left half done by a panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// tower's builder of layered services, re-exported so
/// `ServiceBuilder::new().layer(RetryLayer).layer(DeferOn429)` needs no
/// other crate.
pub use tower::ServiceBuilder;

pub use handler::{HandlerExt, HandlerFuture, HandlerPanicked, HandlerService};
pub use request::JobRequest;
pub use signal::shutdown_signal;
pub use worker::{
    DEFAULT_JOB_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, DefaultStack, Defaults, Handlers,
    MAX_TENANT_WEIGHT, Worker, WorkerBuilder, WorkerError, WorkerHandle,
};
