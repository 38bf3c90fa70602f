//! Per-key limits shared by a fleet: at most K jobs of a key run at once,
//! at most N of a key start per period, across every worker.
//!
//! RabbitMQ has no per-key limit: a queue hands its messages to whichever
//! consumer has room, and a prefetch count or a worker's
//! [`concurrency`](crate::WorkerBuilder::concurrency) bounds one process,
//! not a tenant, a host or an API key across a fleet. [`LimitLayer`] keeps
//! those limits in a [`LimitStore`](queuey_core::store::LimitStore) every worker reaches (a
//! [`MemoryStore`](queuey_core::store::MemoryStore) in one process, a Redis
//! store across processes): the key of a job (a function of the job the
//! application gives, like a [`CooldownLayer`](crate::cooldown::CooldownLayer)'s)
//! is asked, in this order,
//!
//! 1. for its **turn** under the [rate](LimitLayer::rate) (`10/s`, with a
//!    burst): a start now, or a turn reserved for it, and
//! 2. for a **running slot** under the [concurrency](LimitLayer::concurrency)
//!    limit: one of K, leased,
//!
//! and runs only when it has both. A job that must wait is answered
//! [`Disposition::Defer`](queuey_core::Disposition::Defer) **without calling
//! the handler**: the worker parks it in a hold queue, spending no attempt,
//! and it comes back ahead of the backlog. A hold never releases a job
//! early, so nothing starts before its turn, and nothing is lost. A job
//! whose key function answers `None` runs as if there were no layer.
//!
//! # Waiting without a herd
//!
//! - **Rate**: a job told to wait has its turn *reserved* under its job id
//!   and is deferred until exactly then. When it comes back it finds the
//!   reservation and runs: it is parked once, not sent round again, and
//!   jobs of a busy key come back one turn apart, not all together. (A job
//!   back early, because its wait was longer than the
//!   [longest hold](queuey_core::LONGEST_WAIT), is told the time that
//!   remains; one back too late to keep its turn is promised the next free
//!   start, see [`LimitStore`](queuey_core::store::LimitStore).) A turn
//!   taken by a job that then finds every slot held is spent, so with both
//!   limits the rate only ever gets stricter.
//! - <a id="pacing"></a>**Concurrency**: nobody knows when a slot will
//!   free, so the wait is paced from the store's answer (see [`Pace`]):
//!   about the key's typical hold time (an average of how long its slots
//!   were held) per round of K jobs waiting ahead, clamped to 250 ms..60 s
//!   by default, with 1 s assumed before any slot was freed, and spread at
//!   random between half and one and a half of that. Jobs refused together
//!   come back in step with how fast slots free, spread out.
//!
//! # Leases
//!
//! A running job's slot is leased ([`DEFAULT_LEASE`], 30 s), renewed every
//! third of the lease while the job runs, and freed when the job's future
//! ends, however it ends: an answer, an error, a panic caught by the
//! handler, or the future dropped (a shutdown, a timeout outside the layer;
//! then it is freed on a task of its own). A worker that is killed frees
//! nothing: its slots come back when their leases end, within one lease. A
//! renewal that finds the slot gone (the store was unreachable for longer
//! than the lease) is logged as a warning and counted; the job runs on.
//!
//! The holder of a turn and of a slot is the job's id, the same through
//! every deferral and redelivery: a job asking again for its turn is
//! answered the same turn, never a second one. A job holds one slot at
//! most: a second copy of its message, delivered while the first still
//! runs (its acknowledgement lost to a broker restart or a closed
//! connection), waits until the first frees the slot, or until the slot's
//! lease ends if the first copy's worker died, so copies never run beside
//! each other on one slot.
//!
//! # When the store fails
//!
//! Every store call is bounded by the [store timeout](LimitLayer::store_timeout).
//! A call that fails, times out or is refused is counted and logged (a
//! warning at most every 10 s, the rest at debug level), then
//! [`OnStoreError`] decides:
//!
//! - [`FailClosed`](OnStoreError::FailClosed) (the default): the job is
//!   deferred for about the [store pause](LimitLayer::store_pause) (5 s,
//!   spread) and asks again then. Limits hold while the store is down;
//!   limited jobs wait, none is lost.
//! - [`FailOpen`](OnStoreError::FailOpen): the job runs without its limit
//!   and is counted. Work goes on while the store is down; the limits do
//!   not hold.
//!
//! # What it costs
//!
//! One store round trip per limit (two with both) before a keyed job
//! starts, one per third of the lease while it runs, one when it ends. Each
//! wait is one more trip through a hold queue (a publish, a confirm, an
//! acknowledgement) and one more delivery.
//!
//! # Where it goes
//!
//! The layer reads the job, so it goes with its handler to
//! [`WorkerBuilder::handler_with`](crate::WorkerBuilder::handler_with),
//! inside the default stack: a wait is then traced, counted, and
//! dead-lettered instead when the job is past its
//! [deadline](crate::deadline). Its waits are deferrals: the job's deferral
//! count rises with each, like any deferral's. The layer's own waits are
//! never turned into failures by
//! [`DeferOn429::max_deferrals`](crate::defer::DeferOn429::max_deferrals),
//! which acts only on `Retry-After` errors, so a job that merely waited its
//! turn is never dead-lettered for it; but a `Retry-After` that comes later
//! is compared with the whole count, waits included, so leave room for
//! them when setting that limit.
//!
//! # Metrics
//!
//! Labelled by the limit's name and a few fixed values, never by key, so
//! the number of series does not grow with keys.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_limit_waits_total` | counter | `limit`, `wait` | jobs deferred without running: `wait` is `rate`, `concurrency` or `store` (the store failed, failing closed) |
//! | `queuey_limit_wait_seconds` | histogram | `limit`, `wait` | how long those jobs were deferred for |
//! | `queuey_limit_unchecked_total` | counter | `limit`, `reason` | jobs run without their limit, the store having failed (failing open) |
//! | `queuey_limit_store_errors_total` | counter | `limit`, `reason` | store calls that failed, timed out or were refused |
//! | `queuey_limit_leases_lost_total` | counter | `limit` | running slots found gone at renewal |
//!
//! `reason` is `unavailable`, `timed_out` or `refused`
//! ([`StoreError::kind`](queuey_core::store::StoreError::kind)).
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), queuey_core::BoxError> {
//! use queuey_core::store::MemoryStore;
//! use queuey_core::{BoxError, Disposition, JobContext, Uuid};
//! use queuey_tower::JobRequest;
//! use queuey_tower::limit::LimitLayer;
//! use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
//!
//! struct CallApi {
//!     host: String,
//! }
//!
//! // Shared by every worker that reaches the store.
//! let store = MemoryStore::new();
//! let limit = LimitLayer::new("call_api", store, |request: &JobRequest<CallApi>| {
//!     Some(request.job().host.clone())
//! })
//! .concurrency(1)?
//! .rate("10/s".parse()?);
//! let (started, mut release) = tokio::sync::mpsc::channel::<()>(1);
//! let (done, finish) = tokio::sync::watch::channel(false);
//! let mut stack = ServiceBuilder::new()
//!     .layer(limit)
//!     .service(service_fn(move |_: JobRequest<CallApi>| {
//!         let (started, mut finish) = (started.clone(), finish.clone());
//!         async move {
//!             started.send(()).await.ok();
//!             finish.wait_for(|done| *done).await.ok();
//!             Ok::<_, BoxError>(Disposition::Ack)
//!         }
//!     }));
//! let job = |host: &str| {
//!     JobRequest::new(CallApi { host: host.into() }, JobContext::new(Uuid::new_v4(), "q"))
//! };
//!
//! // A first job of the host starts and holds its one slot ...
//! let first = tokio::spawn(stack.ready().await?.call(job("api.example")));
//! release.recv().await;
//! // ... so the next one is deferred without running.
//! let second = stack.ready().await?.call(job("api.example")).await?;
//! assert!(matches!(second, Disposition::Defer { .. }));
//! // Another host is not affected (and the first job ends).
//! done.send(true)?;
//! let other = stack.ready().await?.call(job("other.example")).await?;
//! assert_eq!(other, Disposition::Ack);
//! assert_eq!(first.await??, Disposition::Ack);
//! # Ok(())
//! # }
//! ```

mod admit;
mod error;
pub mod future;
mod layer;
mod pace;
pub(crate) mod seen;
mod service;

use std::time::Duration;

pub use error::ZeroConcurrency;
pub(crate) use layer::{Declared, declared};
pub use layer::{JobKey, LimitLayer, for_job};
pub use pace::{DEFAULT_MAX_WAIT, DEFAULT_MIN_WAIT, DEFAULT_UNKNOWN_HOLD, Pace};
pub use service::Limit;

/// How long a running job's slot holds without renewal by default.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The shortest lease: a shorter one is taken as this.
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// How long a job waits, about, when the store failed and the layer fails
/// closed, by default.
pub const DEFAULT_STORE_PAUSE: Duration = Duration::from_secs(5);

/// Counter of jobs deferred by a limit without running.
pub const WAITS_TOTAL: &str = "queuey_limit_waits_total";

/// Histogram of how long jobs were deferred by a limit, in seconds.
pub const WAIT_SECONDS: &str = "queuey_limit_wait_seconds";

/// Counter of jobs run without their limit because the store failed.
pub const UNCHECKED_TOTAL: &str = "queuey_limit_unchecked_total";

/// Counter of limit store calls that failed, timed out or were refused.
pub const STORE_ERRORS_TOTAL: &str = "queuey_limit_store_errors_total";

/// Counter of running slots found gone when renewed.
pub const LEASES_LOST_TOTAL: &str = "queuey_limit_leases_lost_total";

/// How often a store failure is logged as a warning, at most.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What a [`LimitLayer`] does with a job when its store fails; see
/// [When the store fails](self#when-the-store-fails).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnStoreError {
    /// Run the job without its limit, and count it
    /// (`queuey_limit_unchecked_total`).
    FailOpen,
    /// Defer the job for about the store pause; it asks again then.
    #[default]
    FailClosed,
}
