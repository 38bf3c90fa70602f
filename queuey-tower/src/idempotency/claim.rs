//! The layer's conversation with the store: claiming a delivery, renewing
//! and releasing its claim, recording a finished job. Every call goes
//! through [`bounded`], and every failure through [`Shared::failed`]: the
//! one place where a store error turns into "this job runs at-least-once".

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::store::{Inserted, Store, StoreError, bounded};
use queuey_core::{BoxError, Disposition, JobContext, Uuid};
use tokio::time::Instant;

use crate::leased::{Gate, Lease};

use super::{BUSY_DELAY, DUPLICATES_SKIPPED_TOTAL, STORE_ERRORS_TOTAL, UNGUARDED_TOTAL};
use queuey_core::__private::Throttle;

/// The value of a `done` record.
const DONE: &str = "done";

/// What every service of one layer shares (clones share the store and
/// the warning throttle).
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) window: Duration,
    pub(crate) lease: Duration,
    pub(crate) store_timeout: Duration,
    pub(crate) warnings: Arc<Throttle>,
}

/// One delivery of a job: its keys and the token of this attempt.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    queue: Arc<str>,
    job_id: Uuid,
    done: String,
    running: String,
    token: String,
}

impl Delivery {
    pub(crate) fn new(ctx: &JobContext) -> Self {
        let queue = Arc::clone(ctx.queue_arc());
        let job_id = ctx.job_id();
        Delivery {
            done: done_key(&queue, job_id),
            running: running_key(&queue, job_id),
            token: Uuid::new_v4().simple().to_string(),
            queue,
            job_id,
        }
    }
}

/// The key recording that job `job_id` of `queue` was handled.
pub(crate) fn done_key(queue: &str, job_id: Uuid) -> String {
    format!("queuey:done:{queue}:{job_id}")
}

/// The key of the claim of the delivery running job `job_id` of `queue`.
pub(crate) fn running_key(queue: &str, job_id: Uuid) -> String {
    format!("queuey:running:{queue}:{job_id}")
}

impl Shared {
    /// Claims the delivery, then reads the job's record: a delivery finishing
    /// meanwhile records the job before releasing its claim, so a free claim
    /// comes with a readable record.
    ///
    /// A delivery of a job that finished already is acknowledged without
    /// running; one of a job another delivery runs now is deferred; else
    /// the job runs, holding its claim (none if the store failed).
    pub(crate) async fn check(self: Arc<Self>, delivery: Delivery) -> Gate<Claim> {
        let claim = match self
            .ask(
                &delivery,
                "claiming the job",
                self.store
                    .insert(&delivery.running, &delivery.token, self.lease),
            )
            .await
        {
            Err(cause) => return self.unguarded(&delivery, cause),
            Ok(Inserted::New) => Some(Claim::new(Arc::clone(&self), delivery.clone())),
            Ok(Inserted::Exists(_)) => None,
        };
        let record = self
            .ask(
                &delivery,
                "reading the job's record",
                self.store.get(&delivery.done),
            )
            .await;
        match (record, claim) {
            (Ok(Some(_)), claim) => {
                if let Some(claim) = claim {
                    claim.remove().await;
                }
                self.skipped(&delivery);
                Gate::Answer(Disposition::Ack)
            }
            (Ok(None), None) => {
                tracing::debug!(
                    queue = %delivery.queue,
                    job_id = %delivery.job_id,
                    delay = ?BUSY_DELAY,
                    "another delivery of the job is running it; deferring this one"
                );
                let delay = BUSY_DELAY;
                Gate::Answer(Disposition::Defer { delay })
            }
            (Ok(None), Some(claim)) => Gate::Hold(claim),
            // The record could not be read: the job may run twice, but it
            // runs (holding its claim, if it has one).
            (Err(cause), claim) => {
                let unguarded = self.unguarded(&delivery, cause);
                claim.map_or(unguarded, Gate::Hold)
            }
        }
    }

    /// A delivery that runs without the layer's check (the store failed):
    /// counted in [`UNGUARDED_TOTAL`].
    fn unguarded(&self, delivery: &Delivery, cause: &'static str) -> Gate<Claim> {
        metrics::counter!(
            UNGUARDED_TOTAL,
            "queue" => Arc::clone(&delivery.queue),
            "reason" => cause,
        )
        .increment(1);
        Gate::Run
    }

    /// Runs one store call, bounded; a failure is reported and answers its
    /// cause ([`StoreError::kind`]).
    async fn ask<T>(
        &self,
        delivery: &Delivery,
        doing: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, &'static str> {
        bounded(self.store_timeout, call).await.map_err(|error| {
            self.failed(delivery, doing, &error);
            error.kind()
        })
    }

    /// Reports a store failure: counted, and a warning at most once per
    /// throttle period (debug otherwise) naming a refusal as such.
    fn failed(&self, delivery: &Delivery, doing: &'static str, error: &StoreError) {
        metrics::counter!(
            STORE_ERRORS_TOTAL,
            "queue" => Arc::clone(&delivery.queue),
            "reason" => error.kind(),
        )
        .increment(1);
        let what = match error {
            StoreError::Refused(_) => "refused a call",
            _ => "failed",
        };
        if self.warnings.allow(Instant::now()) {
            tracing::warn!(
                queue = %delivery.queue,
                job_id = %delivery.job_id,
                reason = error.kind(),
                %error,
                "the idempotency store {what} while {doing}; jobs run at-least-once until it \
                 answers again (more store errors in the next {:?} are logged at debug level)",
                self.warnings.every()
            );
        } else {
            tracing::debug!(
                queue = %delivery.queue,
                job_id = %delivery.job_id,
                reason = error.kind(),
                %error,
                "the idempotency store {what} while {doing}; the job runs at-least-once"
            );
        }
    }

    fn skipped(&self, delivery: &Delivery) {
        metrics::counter!(DUPLICATES_SKIPPED_TOTAL, "queue" => Arc::clone(&delivery.queue))
            .increment(1);
        tracing::debug!(
            queue = %delivery.queue,
            job_id = %delivery.job_id,
            "the job was handled already; acknowledging this delivery without running it"
        );
    }

    /// Removes the claim of `delivery`, if it still holds it.
    async fn remove(&self, delivery: &Delivery) {
        self.ask(
            delivery,
            "releasing the job's claim",
            self.store.remove(&delivery.running, &delivery.token),
        )
        .await
        // A claim left behind runs out with its lease.
        .ok();
    }
}

/// The claim of a running delivery; dropped while held (the job's future
/// dropped), it is released in the background rather than left to its lease.
#[derive(Debug)]
pub(crate) struct Claim {
    shared: Arc<Shared>,
    delivery: Delivery,
    held: bool,
}

impl Claim {
    fn new(shared: Arc<Shared>, delivery: Delivery) -> Self {
        Claim {
            shared,
            delivery,
            held: true,
        }
    }

    /// Removes the claim of a delivery that does not run.
    async fn remove(mut self) {
        self.held = false;
        self.shared.remove(&self.delivery).await;
    }
}

impl Lease for Claim {
    const LAYER: &'static str = "idempotency";

    /// A third of the lease, so two renewals may fail before it runs out.
    fn renew_every(&self) -> Duration {
        self.shared.lease / 3
    }

    /// Renews the claim for another lease. A claim found gone is renewed
    /// again at the next period, each time with a (throttled) warning.
    fn renew(&self) -> BoxFuture<'static, bool> {
        let shared = Arc::clone(&self.shared);
        let delivery = self.delivery.clone();
        async move {
            let renewed = shared
                .ask(
                    &delivery,
                    "renewing the job's claim",
                    shared
                        .store
                        .extend(&delivery.running, &delivery.token, shared.lease),
                )
                .await;
            if renewed == Ok(false) && shared.warnings.allow(Instant::now()) {
                tracing::warn!(
                    queue = %delivery.queue,
                    job_id = %delivery.job_id,
                    lease = ?shared.lease,
                    "the job's claim ran out before it could be renewed (the store was \
                     unreachable for longer than the lease?); another delivery of the job may \
                     run it at the same time"
                );
            }
            true
        }
        .boxed()
    }

    /// Records the job as handled if it was acknowledged, then removes the
    /// claim.
    fn release(mut self, answer: &Result<Disposition, BoxError>) -> BoxFuture<'static, ()> {
        self.held = false;
        let acked = matches!(answer, Ok(Disposition::Ack));
        let shared = Arc::clone(&self.shared);
        let delivery = self.delivery.clone();
        async move {
            if acked {
                let recorded = shared
                    .ask(
                        &delivery,
                        "recording the finished job",
                        shared.store.set(&delivery.done, DONE, shared.window),
                    )
                    .await;
                // Not recorded: a copy delivered later runs again.
                if let Err(cause) = recorded {
                    shared.unguarded(&delivery, cause);
                }
            }
            shared.remove(&delivery).await;
        }
        .boxed()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let shared = Arc::clone(&self.shared);
            let delivery = self.delivery.clone();
            runtime.spawn(async move { shared.remove(&delivery).await });
        }
    }
}
