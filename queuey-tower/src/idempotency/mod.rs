//! Jobs handled once: deliveries of a job id that already ran are
//! acknowledged without running it again.
//!
//! RabbitMQ delivers every job at least once. A delivery whose
//! acknowledgement was lost (a connection closed or reset, a broker
//! restarted before it wrote the ack to disk, a worker killed after the
//! handler returned) comes back, and the handler runs again.
//! [`IdempotencyLayer`] keeps two keys per job in a
//! [`Store`] shared by the fleet (a [`MemoryStore`](queuey_core::store::MemoryStore)
//! in one process, a Redis store across processes), for job `X` of queue `Q`:
//!
//! - `queuey:done:{Q}:{X}`, written when a delivery of the job finished
//!   with [`Disposition::Ack`](queuey_core::Disposition::Ack), kept for
//!   the [`window`](IdempotencyLayer::window);
//! - `queuey:running:{Q}:{X}`, the claim of the delivery running it now,
//!   holding a token unique to that delivery, for a
//!   [`lease`](IdempotencyLayer::lease) renewed every third of itself while
//!   the handler runs.
//!
//! For each delivery the layer claims the job, then reads its record:
//!
//! 1. **recorded**: the job ran already. The delivery is answered
//!    `Ack` without calling the inner service, and counted.
//! 2. **claimed by another delivery**, not recorded: a copy runs right now
//!    (say on another worker, after a closed connection handed it over).
//!    This delivery is deferred for one second
//!    ([`Disposition::Defer`](queuey_core::Disposition::Defer), which spends
//!    no attempt) and comes back to find the record and be acknowledged; if the other runner died, its claim runs out within
//!    the lease and the copy runs.
//! 3. **free**: the inner service runs. When it answers `Ok(Ack)`, the
//!    record is written, then the claim released; any other answer or an
//!    error releases the claim (so that a retry can run) and passes on
//!    unchanged.
//!
//! # What "once" means here
//!
//! - A handler that **returned** `Ok` runs once per job id for the
//!   window, however often the job is delivered: the record is written
//!   after the handler returns and before the broker acknowledgement, so a
//!   crash or a lost connection between the two is covered.
//! - A handler that **did not return** (its process crashed mid-run, or it
//!   was killed between its last side effect and the record) runs again:
//!   the broker redelivers the job and the claim runs out after the lease.
//!   Side effects a handler made before that are its own business (an
//!   idempotency key on the call it makes, an upsert).
//! - A store that is **down or slow** fails open: every call is bounded by
//!   the [store timeout](IdempotencyLayer::store_timeout), and a failed
//!   call lets the job run as it would without the layer (at-least-once). It
//!   is counted (`queuey_idempotency_unguarded_total`, below), and logged as
//!   a warning at most once every 10 s (the rest at debug level); a store
//!   that answered with a refusal is logged as a refusal, not as a store
//!   that is down. The layer never loses a job and never holds one longer
//!   than the store timeout per store call.
//! - A job is recognised by its id, which stays the same through retries,
//!   deferrals, holds and redeliveries. Two enqueues are two jobs unless the
//!   producer gives both the same id
//!   ([`EnqueueOptions::job_id`](queuey_core::EnqueueOptions::job_id)): an
//!   `enqueue` that failed and is tried again with the same id is handled
//!   once too.
//!
//! # Where it goes
//!
//! Give it with a handler to
//! [`WorkerBuilder::handler_with`](crate::WorkerBuilder::handler_with):
//! it then sits inside the default stack's retry and deferral layers,
//! around the job timeout and the handler, and sees what the handler
//! answered.
//!
//! - A handler error releases the claim and passes on; the retry layer
//!   makes it a retry and the retried delivery runs (no record was
//!   written), or a dead letter once attempts are spent (a dead letter
//!   replayed later runs again, for the same reason).
//! - A `Retry-After` error passes on the same way and is deferred.
//! - A delivery deferred because another one runs the job is a deferral
//!   like any other (its deferral count rises, the job's
//!   [deadline](crate::deadline) applies), but it is not a
//!   [`DeferOn429::max_deferrals`](crate::defer::DeferOn429::max_deferrals)
//!   failure: that limit counts `Retry-After` errors.
//!
//! Given to [`WorkerBuilder::layer`](crate::WorkerBuilder::layer) instead,
//! it wraps the whole stack and sees the final dispositions: only `Ack` is
//! recorded, and a `Retry`, `Defer` or `DeadLetter` releases the claim the
//! same way.
//!
//! # Metrics
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_jobs_duplicates_skipped_total` | counter | `queue` | deliveries of a job already handled, acknowledged without running it |
//! | `queuey_idempotency_store_errors_total` | counter | `queue`, `reason` | store calls that failed, timed out or were refused |
//! | `queuey_idempotency_unguarded_total` | counter | `queue`, `reason` | deliveries that lost the once-only check to a store failure (fail open): run without a claim, run without their record read, or finished without their record written |
//!
//! `reason` is `unavailable` (the store could not be reached), `timed_out`
//! (it did not answer within the store timeout) or `refused` (it answered
//! and refused the call; look at the store's configuration, not its
//! network).
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
mod throttle;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use queuey_core::store::{DEFAULT_STORE_TIMEOUT, Store, WindowError, check_window};
use tower_layer::Layer;

pub use service::Idempotency;

use claim::Shared;
use throttle::Throttle;

/// How long a handled job is remembered by default: a day.
///
/// Copies of a job come back within seconds of a lost acknowledgement, or
/// when the consumer that held them reconnects; but a copy can also wait
/// behind a backlog, or a fleet stopped for the night can get its
/// unacknowledged jobs back in the morning. A day covers those at the cost
/// of one small key per job handled that day.
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
    store: Arc<dyn Store>,
    window: Duration,
    lease: Duration,
    store_timeout: Duration,
    warnings: Arc<Throttle>,
}

impl IdempotencyLayer {
    /// A layer keeping its keys in `store` (any [`Store`]; an
    /// `Arc<dyn Store>` shared with a producer is one too), with the
    /// default [window](Self::window), [lease](Self::lease) and
    /// [store timeout](Self::store_timeout).
    pub fn new(store: impl Store) -> Self {
        IdempotencyLayer {
            store: Arc::new(store),
            window: DEFAULT_WINDOW,
            lease: DEFAULT_LEASE,
            store_timeout: DEFAULT_STORE_TIMEOUT,
            warnings: Arc::new(Throttle::new(WARN_EVERY)),
        }
    }

    /// How long a handled job is remembered ([`DEFAULT_WINDOW`], a day, by
    /// default). A copy delivered later than this runs again.
    ///
    /// The window goes through [`check_window`]: zero, or more than
    /// [`MAX_WINDOW`](queuey_core::store::MAX_WINDOW) (365 days), is
    /// refused.
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
        self.window = check_window(window)?;
        Ok(self)
    }

    /// How long a running delivery's claim holds without renewal
    /// ([`DEFAULT_LEASE`], 30 s, by default, at least [`MIN_LEASE`]). The
    /// claim is renewed every third of the lease while the handler runs,
    /// so the lease bounds only how long a copy of a job whose runner died
    /// waits before it runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(MIN_LEASE);
        self
    }

    /// How long one store call may take before the job goes on without the
    /// store ([`DEFAULT_STORE_TIMEOUT`] by default).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency::new(
            inner,
            Arc::new(Shared {
                store: Arc::clone(&self.store),
                window: self.window,
                lease: self.lease,
                store_timeout: self.store_timeout,
                warnings: Arc::clone(&self.warnings),
            }),
        )
    }
}
