//! Where a retry layer leaves the error of an attempt it retries, for the
//! worker to record in the job's envelope.
//!
//! The worker makes a slot for every job it runs and hands it to the stack
//! inside the [`JobRequest`](crate::JobRequest); a
//! [`RetryLayer`](struct@crate::retry::RetryLayer) that turns an error
//! into a retry notes the error's text in it, and the worker, once the job
//! is to be retried, records it in the delivered envelope
//! ([`Envelope::record_error`](queuey_core::Envelope::record_error)) so
//! the next attempt carries it. A request built by hand has no slot: its
//! retries record nothing.

use std::sync::{Arc, Mutex, PoisonError};

/// The slot of one job, shared by the request (and its clones) and the
/// worker.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailureSlot(Arc<Mutex<Option<String>>>);

impl FailureSlot {
    /// Notes the error of the attempt being retried (the last note wins,
    /// should a middleware call the stack twice).
    pub(crate) fn note(&self, error: String) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
    }

    /// The noted error, once; `None` when no retry layer noted one.
    pub(crate) fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_gives_its_last_note_once() {
        let slot = FailureSlot::default();
        assert_eq!(slot.take(), None);
        slot.clone().note("first".into());
        slot.note("second".into());
        assert_eq!(slot.take().as_deref(), Some("second"));
        assert_eq!(slot.take(), None);
    }
}
