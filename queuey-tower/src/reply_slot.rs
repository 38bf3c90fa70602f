//! Where a handler's output waits for the worker, for a job a caller waits
//! for.
//!
//! The worker makes a slot only for a job that carries a reply address and
//! hands it to the stack inside the [`JobRequest`](crate::JobRequest);
//! [`HandlerService`](crate::HandlerService) serializes the handler's
//! output into it, and the worker reads it once the job is settled. A job
//! nobody waits for has no slot: its output is dropped unserialized.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::value::RawValue;

/// A handler's output as JSON, or why there is none.
type Filled = Result<Box<RawValue>, String>;

/// The slot of one waited-for job, shared by the request (and its clones)
/// and the worker.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplySlot(Arc<Mutex<Option<Filled>>>);

impl ReplySlot {
    /// Serializes `output` into the slot (the last call wins, should a
    /// middleware call the handler twice).
    pub(crate) fn fill<O: Serialize>(&self, output: &O) {
        let filled = serde_json::value::to_raw_value(output)
            .map_err(|e| format!("the handler's output did not encode as JSON: {e}"));
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(filled);
    }

    /// The output, once the job is over; `None` when the handler never
    /// answered `Ok` (a layer acknowledged the job without it).
    pub(crate) fn take(&self) -> Option<Filled> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_holds_the_last_output_as_json_once() {
        let slot = ReplySlot::default();
        assert!(slot.take().is_none());
        slot.clone().fill(&1);
        slot.fill(&vec!["a"]);
        assert_eq!(slot.take().unwrap().unwrap().get(), r#"["a"]"#);
        assert!(slot.take().is_none());
        let mut keys = std::collections::HashMap::new();
        keys.insert(vec![1], 1);
        slot.fill(&keys);
        assert!(slot.take().unwrap().unwrap_err().contains("did not encode"));
    }
}
