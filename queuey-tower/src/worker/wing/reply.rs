//! The answer to a job a caller waits for: its final outcome, sent once the
//! job is settled.
//!
//! Only a final disposition answers: an acknowledgement (with the output) or
//! a dead letter (with its reason, also for a job with no handler or an
//! undecodable payload). After a retry or deferral the address travels on
//! and the attempt that ends the job answers.

use std::sync::Arc;

use queuey_core::backend::{Backend, Reply, ReplyTo};
use queuey_core::{Disposition, Uuid};

use super::{Ended, Extras, Settled, Starting, Wing};
use crate::deadline::DEADLINE_PASSED;
use crate::reply_slot::ReplySlot;

/// The reply wing: answers the callers that wait, through the worker's
/// backend.
pub(crate) struct ReplyWing {
    backend: Arc<dyn Backend>,
}

impl ReplyWing {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        ReplyWing { backend }
    }
}

/// Where a job's answer stands.
pub(crate) enum Answer {
    /// Nobody waits for the job.
    Unasked,
    /// A caller waits; the handler's output goes in the slot.
    Waiting(ReplySlot),
    /// The reply to send once the job is settled (boxed: rare, and every
    /// job's future has room for this).
    Due(Box<(ReplyTo, Reply)>),
}

impl Wing for ReplyWing {
    type Job = Answer;

    fn start(&self, job: &Starting<'_>, extras: &mut Extras) -> Answer {
        // Only a job a caller waits for gets a slot for its output.
        if job.envelope.reply_to.is_none() {
            return Answer::Unasked;
        }
        let slot = ReplySlot::default();
        extras.reply = Some(slot.clone());
        Answer::Waiting(slot)
    }

    fn run_ended(
        &self,
        answer: &mut Answer,
        disposition: Disposition,
        job: &mut Ended<'_>,
    ) -> Disposition {
        if let (Answer::Waiting(slot), Some(to)) = (&*answer, &job.envelope().reply_to) {
            *answer = match due(&disposition, slot) {
                Some(reply) => Answer::Due(Box::new((to.clone(), reply))),
                None => Answer::Unasked,
            };
        }
        disposition
    }

    async fn settled(&self, answer: Answer, job: &Settled<'_>) {
        if let Answer::Due(due) = answer {
            let (to, reply) = *due;
            Box::pin(send(&*self.backend, job.queue, job.job_id, &to, reply)).await;
        }
    }
}

/// The reply `disposition` calls for, if it is final. The output comes
/// from the job's `slot`.
fn due(disposition: &Disposition, slot: &ReplySlot) -> Option<Reply> {
    let reply = match disposition {
        Disposition::Ack => match slot.take() {
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
    Some(reply)
}

/// Sends `reply` to `to` through the backend. The job is settled already:
/// a reply that cannot be sent is logged, and its caller's timeout ends
/// the wait.
async fn send(backend: &dyn Backend, queue: &str, job_id: Uuid, to: &ReplyTo, reply: Reply) {
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
    use queuey_core::Envelope;
    use queuey_core::memory::MemoryBackend;
    use std::time::Duration;

    #[test]
    fn only_final_dispositions_answer_and_only_a_waiting_caller() {
        let slot = ReplySlot::default();
        slot.fill(&5);
        let ack = due(&Disposition::Ack, &slot).unwrap();
        assert_eq!(
            ack,
            Reply::Value(serde_json::value::to_raw_value(&5).unwrap())
        );
        let empty = ReplySlot::default();
        let bare = due(&Disposition::Ack, &empty).unwrap();
        assert!(matches!(bare, Reply::NoValue(_)));
        let dead = Disposition::DeadLetter {
            reason: "boom".into(),
        };
        assert_eq!(
            due(&dead, &empty).unwrap(),
            Reply::DeadLettered("boom".into())
        );
        let late = Disposition::DeadLetter {
            reason: DEADLINE_PASSED.into(),
        };
        assert_eq!(due(&late, &empty).unwrap(), Reply::DeadlinePassed);
        let delay = Duration::from_secs(1);
        for not_final in [
            Disposition::Retry { delay },
            Disposition::Defer { delay },
            Disposition::Requeue,
        ] {
            assert!(due(&not_final, &empty).is_none());
        }

        // A job nobody waits for gets no slot, and answers nothing.
        let wing = ReplyWing::new(Arc::new(MemoryBackend::new()));
        let queue: Arc<str> = Arc::from("q");
        let unasked = Envelope::new("t", "q", serde_json::value::to_raw_value(&1).unwrap());
        let starting = Starting {
            envelope: &unasked,
            queue: &queue,
            job_type: Some("t"),
            refused: false,
        };
        let mut extras = Extras::default();
        let mut answer = wing.start(&starting, &mut extras);
        assert!(extras.reply.is_none());
        let mut unasked = unasked;
        let mut ended = Ended::new(&mut unasked, &queue);
        wing.run_ended(&mut answer, Disposition::Ack, &mut ended);
        assert!(matches!(answer, Answer::Unasked));
    }
}
