//! One job, from its stack's answer to its settle on the broker.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use queuey_core::escape::Untrusted;
use queuey_core::{BackendErrorKind, Disposition, Error};

use queuey_core::backend::Delivery;
use tokio::sync::OwnedSemaphorePermit;

use super::handle::{Counting, HandleInner};
use super::route::JobFuture;
use super::wing::{Ended, Settled, Wing, Wings, done_for_good, run_beside};
use crate::classifier::{Classify, SharedClassifier, last_resort};
use metrics::{Key, Label, Level, Metadata};

use crate::metrics::{JOBS_SETTLING, SETTLE_FAILURES_TOTAL};

/// What a running job needs of its worker, shared by all its jobs.
pub(crate) struct JobEnv {
    pub(crate) handle: Arc<HandleInner>,
    pub(crate) classifier: SharedClassifier,
    /// The per-job features.
    pub(crate) wings: Wings,
}

/// A delivery whose stack was called: the job's future, or why it could not
/// start (a dead-letter reason).
pub(crate) struct Started {
    pub(crate) delivery: Box<dyn Delivery>,
    pub(crate) job: Result<JobFuture, String>,
    pub(crate) queue: Arc<str>,
    /// What the wings keep of the job.
    pub(crate) wings: <Wings as Wing>::Job,
    /// Its queue's [`JOBS_SETTLING`] gauge ([`settling_key`]).
    pub(crate) settling: Arc<Key>,
    /// The job's concurrency slot, held until it is settled.
    pub(crate) permit: OwnedSemaphorePermit,
}

/// What `metrics::gauge!` would give the settling gauge here.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The key of `queue`'s [`JOBS_SETTLING`] gauge, built once per queue.
pub(crate) fn settling_key(queue: &Arc<str>) -> Key {
    Key::from_parts(JOBS_SETTLING, vec![Label::new("queue", Arc::clone(queue))])
}

/// Runs the job, decides its final disposition, and settles it. An error
/// that reached the worker is deferred if the classifier calls it a wait,
/// else dead-lettered, never dropped; every dead letter is logged once at
/// WARN with its reason.
pub(crate) async fn run_job(started: Started, env: Arc<JobEnv>) {
    let Started {
        mut delivery,
        job,
        queue,
        wings: mut state,
        settling,
        permit: _permit,
    } = started;
    let outcome = match job {
        Ok(future) => {
            let _running = Counting::new(&env.handle.jobs_running);
            run_beside(&env.wings, &state, delivery.envelope(), future).await
        }
        Err(reason) => Ok(Disposition::DeadLetter { reason }),
    };
    let disposition = match outcome {
        Ok(disposition) => disposition.never_early(),
        Err(error) => last_resort(env.classifier.classify(&*error), &*error),
    };
    let disposition = {
        let mut ended = Ended::new(&mut delivery, &queue);
        env.wings.run_ended(&mut state, disposition, &mut ended)
    };
    let envelope = delivery.envelope();
    let job_id = envelope.job_id;
    if let Disposition::DeadLetter { reason } = &disposition {
        tracing::warn!(
            %queue,
            job_type = %Untrusted(&envelope.job_type),
            %job_id,
            attempt = envelope.attempt,
            reason = %Untrusted(reason),
            "job dead-lettered"
        );
    }
    let what = disposition.as_str();
    let for_good = done_for_good(&disposition);
    let settled = {
        let _settling = Counting::new(&env.handle.jobs_settling);
        let gauge = metrics::with_recorder(|r| r.register_gauge(&settling, &METADATA));
        gauge.increment(1.0);
        let settled = delivery.settle(disposition).await;
        gauge.decrement(1.0);
        settled
    };
    match settled {
        Ok(()) => {
            env.handle.jobs_settled.fetch_add(1, Ordering::Relaxed);
            let settled = Settled {
                queue: &queue,
                job_id,
                what,
            };
            env.wings.settled(state, &settled).await;
            if for_good {
                env.handle.jobs_finished.fetch_add(1, Ordering::Relaxed);
            }
        }
        Err(error) => settle_failed(&env, &queue, job_id, what, &error),
    }
}

fn settle_failed(
    env: &JobEnv,
    queue: &Arc<str>,
    job_id: queuey_core::Uuid,
    disposition: &'static str,
    error: &Error,
) {
    let handle = &env.handle;
    handle.settle_failures.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(SETTLE_FAILURES_TOTAL, "queue" => queue.to_string()).increment(1);
    let stale = matches!(error, Error::Backend(e) if e.kind() == BackendErrorKind::NotSettled);
    if stale {
        // The backend counts stale settles in its own metric.
        handle.stale_settles.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            %queue,
            %job_id,
            disposition,
            %error,
            "could not settle a job taken on a connection that is gone; the broker delivers it again"
        );
    } else {
        tracing::error!(
            %queue,
            %job_id,
            disposition,
            %error,
            "could not settle a job; the broker keeps it and will deliver it again"
        );
    }
}
