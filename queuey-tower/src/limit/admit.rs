//! The layer's conversation with the store: a turn, then a slot, for each
//! keyed job; renewing and freeing the slot while and after it runs. Every
//! call goes through [`bounded`], and every failure through
//! [`Shared::failed`] and [`Shared::store_failed`]: the one place where a
//! store error becomes "run anyway" or "wait and ask again".

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::store::{LimitStore, Rate, Slot, StoreError, Turn, bounded, limit};
use queuey_core::{BoxError, Disposition, LONGEST_WAIT, Uuid};
use tokio::time::Instant;

use super::pace::{Pace, spread};
use super::seen;
use super::{
    LEASES_LOST_TOTAL, OnStoreError, STORE_ERRORS_TOTAL, UNCHECKED_TOTAL, WAIT_SECONDS, WAITS_TOTAL,
};
use crate::JobRequest;
use crate::leased::{Gate, Lease};
use queuey_core::__private::Throttle;

/// What every service of one layer shares: the limits and how the store is
/// asked about them.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) name: Arc<str>,
    pub(crate) store: Arc<dyn LimitStore>,
    pub(crate) concurrency: Option<u32>,
    pub(crate) rate: Option<Rate>,
    pub(crate) lease: Duration,
    pub(crate) store_timeout: Duration,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) store_pause: Duration,
    pub(crate) pace: Pace,
    pub(crate) warnings: Arc<Throttle>,
}

/// One keyed job asking to start: its key in the store and its id, the
/// holder of its turn and its slot.
#[derive(Debug, Clone)]
pub(crate) struct Holder {
    key: Arc<str>,
    /// Where the job's own key starts in `key`.
    key_at: usize,
    holder: Arc<str>,
    queue: Arc<str>,
    job_id: Uuid,
    /// Raised when the job is deferred for its limit (see
    /// [`JobRequest::limit_wait_flag`]).
    noted: Option<Arc<AtomicBool>>,
}

impl Holder {
    pub(crate) fn new<J>(name: &str, key: &str, request: &JobRequest<J>) -> Self {
        let ctx = request.ctx();
        let store_key = limit::store_key(name, key);
        Holder {
            key_at: store_key.len() - key.len(),
            key: store_key.into(),
            holder: limit::holder(ctx.job_id()).into(),
            queue: Arc::clone(ctx.queue_arc()),
            job_id: ctx.job_id(),
            noted: request.limit_wait_flag(),
        }
    }

    /// The job's key in the process's book of keys, under `shared`'s limit.
    fn seen<'a>(&'a self, shared: &'a Shared) -> seen::Keyed<'a> {
        seen::Keyed {
            name: &shared.name,
            concurrency: shared.concurrency,
            rate: shared.rate,
            store_key: &self.key,
            key: &self.key[self.key_at..],
        }
    }
}

/// Why a job waits, a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// For its turn under the rate.
    Rate,
    /// For a running slot.
    Concurrency,
    /// For the store, which failed (the layer fails closed).
    Store,
}

impl Wait {
    fn as_str(self) -> &'static str {
        match self {
            Wait::Rate => "rate",
            Wait::Concurrency => "concurrency",
            Wait::Store => "store",
        }
    }
}

impl Shared {
    /// Asks for the job's turn, then for its slot.
    ///
    /// A turn taken by a job that then finds every slot held is spent: the
    /// rate only ever gets stricter for it, never looser. The job runs
    /// holding its slot if the layer limits concurrency (and the store
    /// answered), or is deferred without running.
    pub(crate) async fn admit(self: Arc<Self>, job: Holder) -> Gate<Held> {
        if let Some(rate) = self.rate {
            let turn = self.ask(
                &job,
                "reserving the job's turn",
                self.store.reserve_turn(&job.key, &job.holder, rate),
            );
            match turn.await {
                Ok(Turn::Now) => {}
                // Parked once, until its reserved turn (a hold releases it
                // then or later, never earlier).
                Ok(Turn::Wait(wait)) => return self.wait(&job, Wait::Rate, wait, None),
                Err(error) => return self.store_failed(&job, &error),
            }
        }
        let Some(limit) = self.concurrency else {
            return Gate::Run;
        };
        let slot = self.ask(
            &job,
            "taking a running slot",
            self.store
                .take_slot(&job.key, &job.holder, limit, self.lease),
        );
        match slot.await {
            Ok(Slot::Taken) => Gate::Hold(Held::new(Arc::clone(&self), job)),
            Ok(Slot::Full {
                running,
                waiting,
                typical_hold,
            }) => {
                let wait = self
                    .pace
                    .delay(limit, waiting, typical_hold, fastrand::f64());
                tracing::debug!(
                    limit = %self.name,
                    queue = %job.queue,
                    job_id = %job.job_id,
                    running,
                    waiting,
                    ?typical_hold,
                    "every running slot of the job's key is held"
                );
                self.wait(&job, Wait::Concurrency, wait, Some(waiting))
            }
            // Another run of this job holds its slot: this copy waits until
            // that run frees it, or until its lease ends if that run died.
            Ok(Slot::AlreadyHeld { lease_left }) => {
                tracing::debug!(
                    limit = %self.name,
                    queue = %job.queue,
                    job_id = %job.job_id,
                    ?lease_left,
                    "another run of the job holds its running slot"
                );
                let wait = lease_left.max(self.pace.get_min());
                self.wait(&job, Wait::Concurrency, wait, None)
            }
            Err(error) => self.store_failed(&job, &error),
        }
    }

    /// A job told to wait `wait` (with `waiting` others waiting for a slot,
    /// when the store said): counted, and deferred for it (at most
    /// [`LONGEST_WAIT`], the longest a hold keeps a job: a job back before
    /// its reserved turn is answered the time that remains, never a new
    /// turn).
    fn wait(&self, job: &Holder, why: Wait, wait: Duration, waiting: Option<u32>) -> Gate<Held> {
        seen::waited(job.seen(self), waiting);
        let wait = wait.clamp(Duration::from_millis(1), LONGEST_WAIT);
        metrics::counter!(WAITS_TOTAL, "limit" => Arc::clone(&self.name), "wait" => why.as_str())
            .increment(1);
        metrics::histogram!(WAIT_SECONDS, "limit" => Arc::clone(&self.name), "wait" => why.as_str())
            .record(wait.as_secs_f64());
        tracing::debug!(
            limit = %self.name,
            queue = %job.queue,
            job_id = %job.job_id,
            wait = why.as_str(),
            delay = ?wait,
            "the job waits for its limit; deferred without running it"
        );
        if let Some(noted) = &job.noted {
            noted.store(true, Ordering::Relaxed);
        }
        Gate::Answer(Disposition::Defer { delay: wait })
    }

    /// The store failed while admitting `job`: run it without its limit
    /// (fail open, counted) or defer it for about the store pause (fail
    /// closed).
    fn store_failed(&self, job: &Holder, error: &StoreError) -> Gate<Held> {
        match self.on_store_error {
            OnStoreError::FailOpen => {
                metrics::counter!(
                    UNCHECKED_TOTAL,
                    "limit" => Arc::clone(&self.name),
                    "reason" => error.kind(),
                )
                .increment(1);
                Gate::Run
            }
            OnStoreError::FailClosed => {
                let pause = spread(self.store_pause, fastrand::f64());
                self.wait(job, Wait::Store, pause, None)
            }
        }
    }

    /// Runs one store call, bounded; a failure is reported and passed on.
    async fn ask<T>(
        &self,
        job: &Holder,
        doing: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        bounded(self.store_timeout, call)
            .await
            .inspect_err(|error| {
                self.failed(job, doing, error);
            })
    }

    /// Reports a store failure: counted always, a warning at most once per
    /// throttle period, debug lines otherwise.
    fn failed(&self, job: &Holder, doing: &'static str, error: &StoreError) {
        metrics::counter!(
            STORE_ERRORS_TOTAL,
            "limit" => Arc::clone(&self.name),
            "reason" => error.kind(),
        )
        .increment(1);
        let what = match error {
            StoreError::Refused(_) => "refused a call",
            _ => "failed",
        };
        let then = match self.on_store_error {
            OnStoreError::FailOpen => "jobs of limited keys run without their limit",
            OnStoreError::FailClosed => "jobs of limited keys wait",
        };
        if self.warnings.allow(Instant::now()) {
            tracing::warn!(
                limit = %self.name,
                queue = %job.queue,
                job_id = %job.job_id,
                reason = error.kind(),
                %error,
                "the limit store {what} while {doing}; {then} until it answers again (more \
                 store errors in the next {:?} are logged at debug level)",
                self.warnings.every()
            );
        } else {
            tracing::debug!(
                limit = %self.name,
                queue = %job.queue,
                job_id = %job.job_id,
                reason = error.kind(),
                %error,
                "the limit store {what} while {doing}"
            );
        }
    }

    /// Frees `job`'s slot, if it still holds it.
    async fn free(&self, job: &Holder) {
        self.ask(
            job,
            "freeing the job's running slot",
            self.store.free_slot(&job.key, &job.holder),
        )
        .await
        // A slot left behind comes back when its lease ends.
        .ok();
    }
}

/// The running slot of a job. Dropped while held (the job's future was
/// dropped: a shutdown, a timeout outside the layer), it is freed in the
/// background, so the next job of its key need not wait for the lease.
#[derive(Debug)]
pub(crate) struct Held {
    shared: Arc<Shared>,
    job: Holder,
    held: bool,
}

impl Held {
    fn new(shared: Arc<Shared>, job: Holder) -> Self {
        seen::took(job.seen(&shared));
        Held {
            shared,
            job,
            held: true,
        }
    }
}

impl Lease for Held {
    const LAYER: &'static str = "limit";

    /// A third of the lease, so that two renewals may fail before it runs
    /// out.
    fn renew_every(&self) -> Duration {
        self.shared.lease / 3
    }

    /// Answers `false` when the slot was found gone, which is logged and
    /// counted.
    fn renew(&self) -> BoxFuture<'static, bool> {
        let shared = Arc::clone(&self.shared);
        let job = self.job.clone();
        async move {
            let renewed = shared
                .ask(
                    &job,
                    "renewing the job's running slot",
                    shared.store.renew_slot(&job.key, &job.holder, shared.lease),
                )
                .await;
            if !matches!(renewed, Ok(false)) {
                // Renewed, or the store failed: the next renewal tries again.
                return true;
            }
            metrics::counter!(LEASES_LOST_TOTAL, "limit" => Arc::clone(&shared.name)).increment(1);
            tracing::warn!(
                limit = %shared.name,
                queue = %job.queue,
                job_id = %job.job_id,
                lease = ?shared.lease,
                "the job's running slot ran out before it could be renewed (the store was \
                 unreachable for longer than the lease?); another job of its key may have \
                 started in its place, and this one runs on without a slot"
            );
            false
        }
        .boxed()
    }

    /// Frees the slot, whatever the job answered.
    fn release(mut self, _: &Result<Disposition, BoxError>) -> BoxFuture<'static, ()> {
        self.held = false;
        seen::freed(self.job.seen(&self.shared));
        let shared = Arc::clone(&self.shared);
        let job = self.job.clone();
        async move { shared.free(&job).await }.boxed()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        seen::freed(self.job.seen(&self.shared));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let shared = Arc::clone(&self.shared);
            let job = self.job.clone();
            runtime.spawn(async move { shared.free(&job).await });
        }
    }
}
