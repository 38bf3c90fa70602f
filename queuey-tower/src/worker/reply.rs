//! The answer to a job a caller waits for: its final outcome, sent once the
//! job is settled.
//!
//! Only a final disposition answers: an acknowledgement (with the
//! handler's output) or a dead letter (with its reason). A retry or a
//! deferral is not final: the reply address travels on with the job, and
//! the attempt that ends it answers. Every path that ends a job goes
//! through the worker's one settle (`run_job`), and so through here: a job
//! with no handler, or whose payload does not decode, is a dead letter too.

use queuey_core::backend::{Backend, Reply, ReplyTo};
use queuey_core::{Disposition, Uuid};

use crate::deadline::DEADLINE_PASSED;
use crate::reply_slot::ReplySlot;

/// The reply `disposition` calls for, if a caller waits (`to`) and the
/// disposition is final. The output comes from the job's `slot`.
pub(crate) fn due(
    to: Option<&ReplyTo>,
    disposition: &Disposition,
    slot: Option<&ReplySlot>,
) -> Option<(ReplyTo, Reply)> {
    let to = to?;
    let reply = match disposition {
        Disposition::Ack => match slot.and_then(ReplySlot::take) {
            Some(Ok(value)) => Reply::Value(value),
            Some(Err(why)) => Reply::NoValue(why),
            None => Reply::NoValue(
                "the job was acknowledged without its handler answering (a layer of the \
                 stack acknowledged it)"
                    .to_owned(),
            ),
        },
        Disposition::DeadLetter { reason } if reason == DEADLINE_PASSED => Reply::DeadlinePassed,
        Disposition::DeadLetter { reason } => Reply::DeadLettered(reason.clone()),
        _ => return None,
    };
    Some((to.clone(), reply))
}

/// Sends `reply` to `to` through the backend. The job is settled already:
/// a reply that cannot be sent is logged, and its caller's timeout ends
/// the wait.
pub(crate) async fn send(
    backend: &dyn Backend,
    queue: &str,
    job_id: Uuid,
    to: &ReplyTo,
    reply: Reply,
) {
    let Some(replies) = backend.capabilities().replies() else {
        tracing::warn!(
            %queue,
            %job_id,
            "a caller waits for this job's result, but the worker's backend carries no \
             replies; the job is settled, and the caller's timeout ends its wait"
        );
        return;
    };
    if let Err(error) = replies.reply(to, reply).await {
        tracing::warn!(
            %queue,
            %job_id,
            %error,
            "could not send a job's result to the caller waiting for it; the job is settled, \
             and the caller's timeout ends its wait"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_final_dispositions_answer_and_only_a_waiting_caller() {
        let to = ReplyTo::new("a", "1");
        let slot = ReplySlot::default();
        slot.fill(&5);
        let (_, ack) = due(Some(&to), &Disposition::Ack, Some(&slot)).unwrap();
        assert_eq!(
            ack,
            Reply::Value(serde_json::value::to_raw_value(&5).unwrap())
        );
        let (_, bare) = due(Some(&to), &Disposition::Ack, None).unwrap();
        assert!(matches!(bare, Reply::NoValue(_)));
        let dead = Disposition::DeadLetter {
            reason: "boom".into(),
        };
        assert_eq!(
            due(Some(&to), &dead, None).unwrap().1,
            Reply::DeadLettered("boom".into())
        );
        let late = Disposition::DeadLetter {
            reason: DEADLINE_PASSED.into(),
        };
        assert_eq!(
            due(Some(&to), &late, None).unwrap().1,
            Reply::DeadlinePassed
        );
        let delay = Duration::from_secs(1);
        for not_final in [
            Disposition::Retry { delay },
            Disposition::Defer { delay },
            Disposition::Requeue,
        ] {
            assert!(due(Some(&to), &not_final, None).is_none());
        }
        assert!(due(None, &Disposition::Ack, Some(&slot)).is_none());
    }
}
