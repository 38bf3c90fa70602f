//! Booking a rate-limited job's turn when it is enqueued, so that it reaches
//! a worker when it may start.
//!
//! A job type that declares a rate (`#[job(limit(key = .., rate = ".."))]`)
//! is held to it by its workers: a job of a busy key is delivered, told to
//! wait, parked until its reserved turn and delivered again, two deliveries
//! for one run. A producer given the workers' limit store
//! ([`ProducerBuilder::limit_store`](super::ProducerBuilder::limit_store))
//! books the turn first and publishes the job to arrive then: one delivery.
//!
//! The rules:
//!
//! - Booked: a job of a type that declares a rate and gives a key, due at
//!   once (no delay, no `run_at`), enqueued with `enqueue`,
//!   `enqueue_with` or `enqueue_batch`. A unique job books after its claim,
//!   so a duplicate books nothing.
//! - The holder is the job's id (see [`limit::holder`]): the worker's limit
//!   finds the reservation when the job arrives and starts it, without a
//!   second turn. A concurrency limit is still asked then.
//! - The store fails or misses the producer's store timeout: the job is
//!   published at once, unbooked, and its worker paces it as without a
//!   booking. It is counted ([`UNBOOKED_TOTAL`]) and logged (a warning at
//!   most once a minute); the enqueue never fails for it.
//! - The publish fails: the turn stays spent, held for the job's id until
//!   [`TURN_GRACE`](crate::store::TURN_GRACE) after it is due, so that an
//!   enqueue tried again with the same [`job_id`](crate::EnqueueOptions::job_id)
//!   finds it again.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use crate::Job;
use crate::store::limit::{self, UNBOOKED_TOTAL};
use crate::store::throttle::Throttle;
use crate::store::{LimitStore, Rate, StoreError, bounded};

/// How often a failed booking is logged as a warning, at most.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The limit store a producer books turns in, and the bound on each call.
#[derive(Clone)]
pub(crate) struct Pacer {
    store: Arc<dyn LimitStore>,
    timeout: Duration,
    warnings: Arc<Throttle>,
}

/// A job's turn to book: its key in the store, under its type's rate.
pub(crate) struct Booking {
    job_type: &'static str,
    store_key: String,
    rate: Rate,
}

impl Pacer {
    pub(crate) fn new(store: Arc<dyn LimitStore>, timeout: Duration) -> Self {
        Pacer {
            store,
            timeout,
            warnings: Arc::new(Throttle::new(WARN_EVERY)),
        }
    }

    /// The turn `job` books, if its type declares a rate and it gives a key.
    pub(crate) fn booking<J: Job>(job: &J) -> Option<Booking> {
        let rate = J::limits()?.rate()?;
        let key = job.limit_key()?;
        Some(Booking {
            job_type: J::NAME,
            store_key: limit::store_key(J::NAME, &key),
            rate,
        })
    }

    /// Books the turn of job `job_id`: how long until it is due (zero for
    /// now), or `None` when the store failed (the job goes unbooked).
    pub(crate) async fn book(&self, booking: &Booking, job_id: Uuid) -> Option<Duration> {
        let holder = limit::holder(job_id);
        let call = self
            .store
            .book_turn(&booking.store_key, &holder, booking.rate);
        match bounded(self.timeout, call).await {
            Ok(wait) => Some(wait),
            Err(error) => {
                self.unbooked(booking, job_id, &error);
                None
            }
        }
    }

    fn unbooked(&self, booking: &Booking, job_id: Uuid, error: &StoreError) {
        metrics::counter!(
            UNBOOKED_TOTAL,
            "job_type" => booking.job_type,
            "reason" => error.kind(),
        )
        .increment(1);
        if self.warnings.allow(Instant::now()) {
            tracing::warn!(
                job_type = booking.job_type,
                %job_id,
                reason = error.kind(),
                %error,
                "the limit store failed while booking the job's turn; it is enqueued at once \
                 and its worker paces it (more such failures in the next minute are logged at \
                 debug level)"
            );
        } else {
            tracing::debug!(
                job_type = booking.job_type,
                %job_id,
                reason = error.kind(),
                %error,
                "the limit store failed while booking the job's turn"
            );
        }
    }
}

impl fmt::Debug for Pacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacer")
            .field("store", &self.store)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
