//! Jobs handled once: deliveries of a job id that already ran are
//! acknowledged without running it again.
//!
//! RabbitMQ delivers every job at least once: a delivery whose
//! acknowledgement was lost (a connection reset, a broker restart before the
//! ack reached disk, a worker killed after the handler returned) comes back.
//! [`IdempotencyLayer`] keeps two keys per job `X` of queue `Q` in a
//! [`Store`] shared by the fleet (a [`MemoryStore`](queuey_core::store::MemoryStore)
//! in one process, a Redis store across processes):
//!
//! - `queuey:done:{Q}:{X}`, written when a delivery finished with
//!   [`Disposition::Ack`](queuey_core::Disposition::Ack), kept for the
//!   [`window`](IdempotencyLayer::window);
//! - `queuey:running:{Q}:{X}`, the claim of the delivery running it now (a
//!   token unique to it), for a [`lease`](IdempotencyLayer::lease) renewed
//!   every third of itself while the handler runs.
//!
//! For each delivery the layer claims the job, then reads its record:
//!
//! 1. **recorded**: the job ran already; answered `Ack` without calling the
//!    inner service, and counted.
//! 2. **claimed by another delivery**, not recorded: a copy runs right now.
//!    This one is deferred for one second
//!    ([`Disposition::Defer`](queuey_core::Disposition::Defer), no attempt
//!    spent) to come back to the record; if the other runner died, its claim
//!    runs out within the lease and the copy runs.
//! 3. **free**: the inner service runs. On `Ok(Ack)` the record is written,
//!    then the claim released; any other answer or an error releases the
//!    claim (so a retry can run) and passes on unchanged.
//!
//! # What "once" means here
//!
//! - A handler that **returned** `Ok` runs once per job id for the window:
//!   the record is written before the broker acknowledgement, so a crash or
//!   lost connection between the two is covered.
//! - A handler that **did not return** (a crash mid-run, or a kill before
//!   the record) runs again once the claim's lease runs out; side effects it
//!   made are its own business (an idempotency key on its call, an upsert).
//! - A store that is **down or slow** fails open: each call is bounded by
//!   the [store timeout](IdempotencyLayer::store_timeout), and a failed call
//!   lets the job run as without the layer (at-least-once), counted
//!   (`queuey_idempotency_unguarded_total`) and logged as a warning at most
//!   once every 10 s (the rest at debug); a refusal is logged as a refusal.
//!   The layer never loses a job nor holds one longer than the store
//!   timeout per call.
//! - A job is recognised by its id, kept through retries, deferrals, holds
//!   and redeliveries. Two enqueues are two jobs unless both give the same
//!   id ([`EnqueueOptions::job_id`](queuey_core::EnqueueOptions::job_id)),
//!   so a failed `enqueue` tried again with its id is handled once too.
//!
//! # Where it goes
//!
//! Given with a handler to
//! [`WorkerBuilder::handler_with`](crate::WorkerBuilder::handler_with), it
//! sits inside the default stack's retry and deferral layers and sees what
//! the handler answered:
//!
//! - a handler error releases the claim and passes on, to be retried (no
//!   record was written) or dead-lettered (a replayed dead letter runs
//!   again); a `Retry-After` error is deferred the same way;
//! - a delivery deferred because another runs the job is a deferral like
//!   any other (its count rises, its [deadline](crate::deadline) applies),
//!   but not a [`DeferOn429::max_deferrals`](crate::defer::DeferOn429::max_deferrals)
//!   failure: that limit counts `Retry-After` errors.
//!
//! Given to [`WorkerBuilder::layer`](crate::WorkerBuilder::layer), it wraps
//! the whole stack: only a final `Ack` is recorded; a `Retry`, `Defer` or
//! `DeadLetter` releases the claim.
//!
//! # Metrics
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_jobs_duplicates_skipped_total` | counter | `queue` | deliveries of a job already handled, acknowledged without running it |
//! | `queuey_idempotency_store_errors_total` | counter | `queue`, `reason` | store calls that failed, timed out or were refused |
//! | `queuey_idempotency_unguarded_total` | counter | `queue`, `reason` | deliveries that lost the once-only check to a store failure (fail open): run without a claim, run without their record read, or finished without their record written |
//!
//! `reason` is `unavailable` (unreachable), `timed_out` (no answer within
//! the store timeout) or `refused` (it refused the call: look at the store's
//! configuration, not its network).
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use queuey_core::store::MemoryStore;
//! use queuey_core::{BoxError, Disposition, JobContext, Uuid};
//! use queuey_tower::JobRequest;
//! use queuey_tower::idempotency::IdempotencyLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! let runs = Arc::new(AtomicU32::new(0));
//! let counted = Arc::clone(&runs);
//! let stack = ServiceBuilder::new()
//!     .layer(IdempotencyLayer::new(MemoryStore::new()))
//!     .service(service_fn(move |_: JobRequest<()>| {
//!         counted.fetch_add(1, Ordering::SeqCst);
//!         async { Ok::<_, BoxError>(Disposition::Ack) }
//!     }));
//!
//! // The same job delivered twice (its first acknowledgement was lost).
//! let ctx = JobContext::new(Uuid::new_v4(), "app.emails");
//! let first = stack.clone().oneshot(JobRequest::new((), ctx.clone())).await.unwrap();
//! let again = stack.oneshot(JobRequest::new((), ctx.with_redelivered(true))).await.unwrap();
//! assert_eq!((first, again), (Disposition::Ack, Disposition::Ack));
//! assert_eq!(runs.load(Ordering::SeqCst), 1);
//! # }
//! ```

mod claim;
pub mod future;
mod service;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use queuey_core::store::{DEFAULT_STORE_TIMEOUT, Store, WindowError, check_window};
use tower_layer::Layer;

pub use service::Idempotency;

use claim::Shared;
use queuey_core::__private::Throttle;

/// How long a handled job is remembered by default: a day, which covers a
/// copy waiting behind a backlog or a fleet stopped for the night, at one
/// small key per job handled that day.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a running delivery's claim holds without renewal by default.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The shortest lease: a shorter one is taken as this.
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// Counter of deliveries acknowledged without running, the job being
/// handled already.
pub const DUPLICATES_SKIPPED_TOTAL: &str = "queuey_jobs_duplicates_skipped_total";

/// Counter of store calls that failed, timed out or were refused.
pub const STORE_ERRORS_TOTAL: &str = "queuey_idempotency_store_errors_total";

/// Counter of deliveries that lost the once-only check to a store failure
/// and ran (or finished) at-least-once: the layer failing open.
pub const UNGUARDED_TOTAL: &str = "queuey_idempotency_unguarded_total";

/// How long a delivery waits when another delivery of its job is running.
const BUSY_DELAY: Duration = Duration::from_secs(1);

/// How often a store failure is logged as a warning, at most.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Runs each job once per id; see the [module documentation](self).
///
/// Clones share their store and their warning throttle.
#[derive(Debug, Clone)]
pub struct IdempotencyLayer {
    shared: Shared,
}

impl IdempotencyLayer {
    /// A layer keeping its keys in `store` (any [`Store`]; an
    /// `Arc<dyn Store>` shared with a producer is one too), with the
    /// default [window](Self::window), [lease](Self::lease) and
    /// [store timeout](Self::store_timeout).
    pub fn new(store: impl Store) -> Self {
        IdempotencyLayer {
            shared: Shared {
                store: Arc::new(store),
                window: DEFAULT_WINDOW,
                lease: DEFAULT_LEASE,
                store_timeout: DEFAULT_STORE_TIMEOUT,
                warnings: Arc::new(Throttle::new(WARN_EVERY)),
            },
        }
    }

    /// How long a handled job is remembered ([`DEFAULT_WINDOW`] by default);
    /// a copy delivered later runs again. [`check_window`] refuses zero or
    /// more than [`MAX_WINDOW`](queuey_core::store::MAX_WINDOW) (365 days).
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_core::store::{MemoryStore, WindowError};
    /// use queuey_tower::idempotency::IdempotencyLayer;
    ///
    /// let week = IdempotencyLayer::new(MemoryStore::new()).window(Duration::from_secs(7 * 86_400));
    /// assert!(week.is_ok());
    /// let zero = IdempotencyLayer::new(MemoryStore::new()).window(Duration::ZERO);
    /// assert!(matches!(zero, Err(WindowError::Zero)));
    /// ```
    pub fn window(mut self, window: Duration) -> Result<Self, WindowError> {
        self.shared.window = check_window(window)?;
        Ok(self)
    }

    /// How long a running delivery's claim holds without renewal
    /// ([`DEFAULT_LEASE`] by default, at least [`MIN_LEASE`]). Renewed every
    /// third of itself, it bounds only how long a copy of a job whose runner
    /// died waits.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.shared.lease = lease.max(MIN_LEASE);
        self
    }

    /// How long one store call may take before the job goes on without the
    /// store ([`DEFAULT_STORE_TIMEOUT`] by default).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.shared.store_timeout = timeout;
        self
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency::new(inner, Arc::new(self.shared.clone()))
    }
}
