//! The errors of a job's earlier attempts, carried by the job itself.
//!
//! A retry layer notes a retried attempt's error in the job's
//! [`FailureSlot`], which this wing hands the request; for a job to be
//! retried the wing records it in the delivered envelope
//! ([`Envelope::record_error`]), from which the next attempt (and its dead
//! letter) is published. A backend whose envelopes cannot change keeps no
//! history.
//!
//! [`Envelope::record_error`]: queuey_core::Envelope::record_error

use queuey_core::Disposition;

use super::{Ended, Extras, Starting, Wing};
use crate::failure_slot::FailureSlot;

/// The history wing.
pub(crate) struct HistoryWing;

impl Wing for HistoryWing {
    /// The job's slot; none for a job refused before it ran.
    type Job = Option<FailureSlot>;

    fn start(&self, job: &Starting<'_>, extras: &mut Extras) -> Option<FailureSlot> {
        if job.refused {
            return None;
        }
        let slot = FailureSlot::default();
        extras.failure = Some(slot.clone());
        Some(slot)
    }

    fn run_ended(
        &self,
        slot: &mut Option<FailureSlot>,
        disposition: Disposition,
        job: &mut Ended<'_>,
    ) -> Disposition {
        if let Disposition::Retry { .. } = disposition
            && let Some(error) = slot.as_ref().and_then(FailureSlot::take)
            && let Some(envelope) = job.envelope_mut()
        {
            envelope.record_error(&error, queuey_core::__private::now_ms());
        }
        disposition
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use queuey_core::Envelope;

    use super::*;

    #[test]
    fn a_retried_job_carries_the_error_its_retry_layer_noted() {
        let queue: Arc<str> = Arc::from("q");
        let mut envelope = Envelope::new("t", "q", serde_json::value::to_raw_value(&1).unwrap());
        let starting = Starting {
            envelope: &envelope.clone(),
            queue: &queue,
            job_type: Some("t"),
            refused: false,
        };
        let mut extras = Extras::default();
        let mut slot = HistoryWing.start(&starting, &mut extras);
        extras.failure.take().unwrap().put("HTTP 503".into());
        let retry = Disposition::Retry {
            delay: Duration::from_secs(1),
        };
        let mut ended = Ended::new(&mut envelope, &queue);
        HistoryWing.run_ended(&mut slot, retry, &mut ended);
        let errors: Vec<_> = envelope.errors.iter().map(|e| e.error.as_str()).collect();
        assert_eq!(errors, ["HTTP 503"]);

        // Acknowledged, or refused before it ran: nothing is recorded.
        let mut slot = HistoryWing.start(&starting, &mut extras);
        extras.failure.take().unwrap().put("ignored".into());
        HistoryWing.run_ended(
            &mut slot,
            Disposition::Ack,
            &mut Ended::new(&mut envelope, &queue),
        );
        let refused = Starting {
            refused: true,
            ..starting
        };
        assert!(HistoryWing.start(&refused, &mut extras).is_none());
        assert!(extras.failure.is_none());
        assert_eq!(envelope.errors.len(), 1);
    }
}
