//! Slots a job's stack leaves a value in for the worker: here, the error of
//! an attempt a [`RetryLayer`](struct@crate::retry::RetryLayer) retries,
//! which the worker records in the envelope (see the history wing). A
//! request built by hand has no slot: its retries record nothing.

use std::sync::{Arc, Mutex};

/// One value a job's stack leaves for the worker, shared by the request
/// (and its clones) and the worker; the last one put wins.
#[derive(Debug, Clone)]
pub(crate) struct Slot<T>(Arc<Mutex<Option<T>>>);

/// The error of the attempt being retried.
pub(crate) type FailureSlot = Slot<String>;

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(Arc::default())
    }
}

impl<T> Slot<T> {
    /// Puts `value` in the slot, replacing what was there.
    pub(crate) fn put(&self, value: T) {
        *crate::lock(&self.0) = Some(value);
    }

    /// What was put, once; `None` when nothing was.
    pub(crate) fn take(&self) -> Option<T> {
        crate::lock(&self.0).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_gives_its_last_note_once() {
        let slot = FailureSlot::default();
        assert_eq!(slot.take(), None);
        slot.clone().put("first".into());
        slot.put("second".into());
        assert_eq!(slot.take().as_deref(), Some("second"));
        assert_eq!(slot.take(), None);
    }
}
