//! Waiting for a job's result: the error a waiting caller gets, and how a
//! reply becomes the job's output.

use std::time::Duration;

use uuid::Uuid;

use super::Producer;
use crate::backend::{Replies, Reply};
use crate::{EnqueueOptions, Error, Job, Queues};

/// A wait that never ends in practice, for a timeout too large to add to
/// the clock.
const NO_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl<Q: Queues, B: Replies> Producer<Q, B> {
    /// Enqueues a job and waits for its final outcome: the handler's
    /// [`Output`](Job::Output) once the job succeeded, or why there is
    /// none. Waits at most `timeout` in all, enqueueing included.
    ///
    /// Only the final outcome answers: a job that is retried or deferred
    /// answers once it succeeds or is dead-lettered. The timeout is the
    /// only bound: a job that is still queued, held or running when it
    /// passes goes on (its result is then dropped), and so does a job whose
    /// reply cannot come back ([`WaitError::ReplyLost`]). A job that is
    /// delivered twice (at least once, as always) may answer twice; the
    /// first answer wins.
    ///
    /// Fire-and-forget ([`enqueue`](Producer::enqueue)) stays the default
    /// and costs nothing: only a waited-for job's output is serialized and
    /// sent back. The backend must carry results ([`Replies`]: the memory
    /// and RabbitMQ backends do).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use queuey_core::backend::{Backend, Replies, Reply};
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::{Job, Producer, Queues};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     Prices,
    /// }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Prices, output = u64)]
    /// struct PriceOrder {
    ///     items: u64,
    /// }
    ///
    /// let backend = Arc::new(MemoryBackend::new());
    /// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    /// // A worker would run the handler; here the reply is sent by hand.
    /// let worker = tokio::spawn({
    ///     let backend = backend.clone();
    ///     async move {
    ///         let mut deliveries = backend.consume(&AppQueues::Prices.config()).await?;
    ///         let delivery = deliveries.next().await.expect("a job")?;
    ///         let order: PriceOrder = delivery.envelope().payload_as()?;
    ///         let to = delivery.envelope().reply_to.clone().expect("a waiting caller");
    ///         delivery.ack().await?;
    ///         let value = serde_json::value::to_raw_value(&(order.items * 250))?;
    ///         backend.reply(&to, Reply::Value(value)).await?;
    ///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    ///     }
    /// });
    /// let cents = producer
    ///     .enqueue_and_wait(&PriceOrder { items: 4 }, Duration::from_secs(5))
    ///     .await?;
    /// assert_eq!(cents, 1000);
    /// # worker.await?.map_err(|e| e.to_string())?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enqueue_and_wait<J: Job<Queues = Q>>(
        &self,
        job: &J,
        timeout: Duration,
    ) -> Result<J::Output, WaitError> {
        self.enqueue_and_wait_with(job, EnqueueOptions::default(), timeout)
            .await
    }

    /// Enqueues a job with [`EnqueueOptions`] and waits for its final
    /// outcome, as [`enqueue_and_wait`](Producer::enqueue_and_wait) does.
    ///
    /// A priority, a correlation id, a deadline and a job id work as for
    /// [`enqueue_with`](Producer::enqueue_with); a delay or a `run_at` is
    /// refused with [`Error::InvalidConfig`] (enqueue such a job without
    /// waiting for it).
    pub async fn enqueue_and_wait_with<J: Job<Queues = Q>>(
        &self,
        job: &J,
        mut options: EnqueueOptions,
        timeout: Duration,
    ) -> Result<J::Output, WaitError> {
        let unique = options.unique.take().or_else(|| job.unique());
        let (mut envelope, wait) = self.envelope_with(job, options)?;
        if wait.is_some() {
            return Err(Error::invalid_config(format!(
                "a `{}` job for queue `{}` was given a delay or a run_at time and a caller that \
                 waits for it; enqueue a delayed job without waiting for its result",
                J::NAME,
                envelope.queue
            ))
            .into());
        }
        let job_id = envelope.job_id;
        let timed_out = || WaitError::TimedOut {
            job_id,
            job_type: J::NAME,
            timeout,
        };
        let deadline = tokio::time::Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| tokio::time::Instant::now() + NO_TIMEOUT);
        let claim = match &unique {
            Some(unique) => Some(self.claim(&mut envelope, unique).await?),
            None => None,
        };
        let key = envelope.unique_key.clone();
        let pending = match tokio::time::timeout_at(deadline, self.backend.request(envelope)).await
        {
            Ok(Ok(pending)) => pending,
            Ok(Err(error)) => {
                self.give_back_if_unsent(claim, &error, key.as_deref(), job_id)
                    .await;
                return Err(error.into());
            }
            Err(_) => return Err(timed_out()),
        };
        match tokio::time::timeout_at(deadline, pending).await {
            Ok(Ok(reply)) => output(reply, job_id, J::NAME),
            Ok(Err(lost)) => Err(WaitError::ReplyLost {
                job_id,
                job_type: J::NAME,
                reason: lost.reason().to_owned(),
            }),
            Err(_) => Err(timed_out()),
        }
    }
}

/// Why [`Producer::enqueue_and_wait`](crate::Producer::enqueue_and_wait)
/// has no output to return.
///
/// Only the job's final outcome answers: retries and deferrals in between
/// are not seen by the caller. The variants that say "the job may still
/// run" mean just that: the job keeps its at-least-once guarantee whether
/// or not anyone waits for it.
///
/// The enum is `#[non_exhaustive]`: keep a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The job could not be enqueued (the error says whether the broker may
    /// hold it all the same).
    #[error("could not enqueue the job to wait for: {0}")]
    Enqueue(#[from] Error),

    /// The job failed for good: it was dead-lettered, for `reason`.
    #[error(
        "the `{job_type}` job {job_id} failed for good and was dead-lettered: {reason}; \
         its dead-letter queue holds it for inspection or replay"
    )]
    DeadLettered {
        /// The job's id.
        job_id: Uuid,
        /// The job's type name.
        job_type: &'static str,
        /// The dead-letter reason.
        reason: String,
    },

    /// The job was dead-lettered because its deadline passed before it
    /// could finish.
    #[error(
        "the `{job_type}` job {job_id} was dead-lettered because its deadline passed \
         before it could finish; give it a later deadline, or more workers"
    )]
    DeadlinePassed {
        /// The job's id.
        job_id: Uuid,
        /// The job's type name.
        job_type: &'static str,
    },

    /// No reply came within the caller's timeout. The job may still run:
    /// it stays queued or in progress, and its reply will be dropped.
    #[error(
        "no result for the `{job_type}` job {job_id} within {timeout:?}; the job may still \
         run (it is queued, held for a retry or running), but its result will be dropped; \
         wait longer, or look the outcome up elsewhere"
    )]
    TimedOut {
        /// The job's id.
        job_id: Uuid,
        /// The job's type name.
        job_type: &'static str,
        /// The caller's timeout.
        timeout: Duration,
    },

    /// The reply can no longer come (the connection that carried the reply
    /// address dropped, or the backend closed). The job may still run.
    #[error(
        "the result of the `{job_type}` job {job_id} cannot reach this caller any more: \
         {reason}; the job may still run, and its result will be dropped"
    )]
    ReplyLost {
        /// The job's id.
        job_id: Uuid,
        /// The job's type name.
        job_type: &'static str,
        /// What the backend knows.
        reason: String,
    },

    /// The job succeeded, but its reply did not decode as the job's
    /// output type (producer and worker disagree on the type), or the
    /// worker had no output to send.
    #[error(
        "the `{job_type}` job {job_id} succeeded, but its result is unusable: {detail}; \
         check that the producer and the worker run the same version of the job's output type"
    )]
    Decode {
        /// The job's id.
        job_id: Uuid,
        /// The job's type name.
        job_type: &'static str,
        /// What went wrong.
        detail: String,
    },
}

/// The job's output from its reply, or the error the reply stands for.
fn output<O: serde::de::DeserializeOwned>(
    reply: Reply,
    job_id: Uuid,
    job_type: &'static str,
) -> Result<O, WaitError> {
    match reply {
        Reply::Value(json) => serde_json::from_str(json.get()).map_err(|e| WaitError::Decode {
            job_id,
            job_type,
            detail: format!("the output does not decode: {e}"),
        }),
        Reply::DeadLettered(reason) => Err(WaitError::DeadLettered {
            job_id,
            job_type,
            reason,
        }),
        Reply::DeadlinePassed => Err(WaitError::DeadlinePassed { job_id, job_type }),
        Reply::NoValue(detail) => Err(WaitError::Decode {
            job_id,
            job_type,
            detail,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reply_becomes_the_output_or_its_error() {
        let id = Uuid::new_v4();
        let value = Reply::Value(serde_json::value::to_raw_value(&7u32).unwrap());
        assert_eq!(output::<u32>(value.clone(), id, "t").unwrap(), 7);
        let wrong = output::<String>(value, id, "t").unwrap_err();
        assert!(matches!(wrong, WaitError::Decode { .. }), "{wrong}");
        assert!(wrong.to_string().contains("same version"), "{wrong}");
        let dead = output::<u32>(Reply::DeadLettered("boom".into()), id, "t").unwrap_err();
        assert!(
            matches!(&dead, WaitError::DeadLettered { reason, .. } if reason == "boom"),
            "{dead}"
        );
        let late = output::<u32>(Reply::DeadlinePassed, id, "t").unwrap_err();
        assert!(late.to_string().contains("deadline passed"), "{late}");
    }

    #[test]
    fn a_timeout_says_the_job_may_still_run() {
        let e = WaitError::TimedOut {
            job_id: Uuid::nil(),
            job_type: "t",
            timeout: Duration::from_secs(2),
        };
        assert!(e.to_string().contains("may still run"), "{e}");
    }
}
