//! How a waited-for job's reply becomes its output, or the error a
//! waiting caller gets.

use std::time::Duration;

use uuid::Uuid;

use crate::Error;
use crate::backend::Reply;

/// Why [`Producer::enqueue_and_wait`](crate::Producer::enqueue_and_wait)
/// has no output to return.
///
/// Only the final outcome answers; retries and deferrals are not seen. "The
/// job may still run" means just that: the job stays at-least-once whether
/// anyone waits or not. `#[non_exhaustive]`: keep a wildcard arm.
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
pub(super) fn output<O: serde::de::DeserializeOwned>(
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
        Reply::Progress(_) => Err(WaitError::Decode {
            job_id,
            job_type,
            detail: "the backend handed a progress report over as the final outcome".to_owned(),
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
