//! One job, from its stack's answer to its settle on the broker.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use queuey_core::escape::Untrusted;
use queuey_core::{BackendErrorKind, Disposition, Error};

use queuey_core::backend::{Backend, Delivery};
use tokio::sync::OwnedSemaphorePermit;

use super::control;
use super::handle::{Counting, HandleInner};
use super::heartbeat::{Ledger, Tally};
use super::reply;
use super::route::JobFuture;
use super::unique::UniqueKeys;
use crate::classifier::{Classify, SharedClassifier, last_resort};
use metrics::{Key, Label, Level, Metadata};

use crate::metrics::{JOBS_SETTLING, SETTLE_FAILURES_TOTAL};
use crate::reply_slot::ReplySlot;

/// What a running job needs of its worker: shared by every job of one
/// worker, held by a job's runner only while it runs one.
pub(crate) struct JobEnv {
    pub(crate) handle: Arc<HandleInner>,
    pub(crate) classifier: SharedClassifier,
    pub(crate) unique_keys: Option<UniqueKeys>,
    /// The backend, for the replies to jobs a caller waits for.
    pub(crate) backend: Arc<dyn Backend>,
    /// What the heartbeats report.
    pub(crate) ledger: Arc<Ledger>,
}

/// A delivery whose stack was called: the job's future, or why it could not
/// start (a dead-letter reason).
pub(crate) struct Started {
    pub(crate) delivery: Box<dyn Delivery>,
    pub(crate) job: Result<JobFuture, String>,
    pub(crate) queue: Arc<str>,
    /// The handler's output, for a job a caller waits for.
    pub(crate) reply: Option<ReplySlot>,
    /// What tells the running job it was cancelled.
    pub(crate) cancel: Option<control::Watch>,
    /// The job's entry among the running jobs the heartbeats report.
    pub(crate) running: Option<u64>,
    /// Its queue's [`JOBS_SETTLING`] gauge ([`settling_key`]).
    pub(crate) settling: Arc<Key>,
    /// Its queue's tally of settles, for the heartbeats.
    pub(crate) tally: Arc<Tally>,
    /// The job's concurrency slot, held until it is settled.
    pub(crate) permit: OwnedSemaphorePermit,
}

/// What `metrics::gauge!` would give the settling gauge here.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The key of `queue`'s [`JOBS_SETTLING`] gauge, built once per queue
/// rather than once per job.
pub(crate) fn settling_key(queue: &Arc<str>) -> Key {
    Key::from_parts(JOBS_SETTLING, vec![Label::new("queue", Arc::clone(queue))])
}

/// Runs the job, decides its final disposition, and settles it. An error
/// that reached the worker is classified by the worker's classifier: a wait
/// is deferred, anything else dead-lettered, never dropped. Every dead
/// letter is logged once, at WARN, with its reason. Once a final
/// disposition is settled, a caller waiting for the job gets its outcome.
pub(crate) async fn run_job(started: Started, env: Arc<JobEnv>) {
    let Started {
        delivery,
        job,
        queue,
        reply,
        cancel,
        running,
        settling,
        tally,
        permit: _permit,
    } = started;
    let outcome = match job {
        Ok(future) => {
            let _running = Counting::new(&env.handle.jobs_running);
            let output = control::run_watching(future, cancel.as_ref(), delivery.envelope()).await;
            if let Some(key) = running {
                env.ledger.finished(key);
            }
            output
        }
        Err(reason) => Ok(Disposition::DeadLetter { reason }),
    };
    let disposition = match outcome {
        Ok(disposition) => disposition.never_early(),
        Err(error) => last_resort(env.classifier.classify(&*error), &*error),
    };
    let disposition = control::after_run(disposition, cancel.as_ref(), &queue, &env.handle);
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
    let done_for_good = matches!(
        disposition,
        Disposition::Ack | Disposition::DeadLetter { .. }
    );
    // Only a unique job carries a key; every other job skips this.
    // The worker computes the key again from the job before giving it back.
    let unique = match (&env.unique_keys, &envelope.unique_key) {
        (Some(_), Some(_)) if done_for_good => Some(Box::new(envelope.clone())),
        _ => None,
    };
    let reply = reply::due(envelope.reply_to.as_ref(), &disposition, reply.as_ref());
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
            tally.settled(what);
            // The rare ways are boxed: inline, their room would make every
            // job's future larger.
            if let (Some(keys), Some(envelope)) = (&env.unique_keys, unique) {
                Box::pin(keys.release(&envelope, &queue)).await;
            }
            if done_for_good {
                env.handle.jobs_finished.fetch_add(1, Ordering::Relaxed);
            }
            if let Some((to, reply)) = reply {
                Box::pin(reply::send(&*env.backend, &queue, job_id, &to, reply)).await;
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
        // Counted as a settle failure above; whether a settle was stale is
        // the backend's to count (RabbitMQ: `queuey_rabbitmq_stale_settles_total`),
        // so the worker keeps no metric of its own for it.
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
