//! Where a handler's output waits for the worker, for a job a caller waits
//! for: [`HandlerService`](crate::HandlerService) serializes it into the
//! slot the request carries. A job nobody waits for has no slot: its output
//! is dropped unserialized.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::failure_slot::Slot;

/// A handler's output as JSON, or why there is none.
type Filled = Result<Box<RawValue>, String>;

/// The slot of one waited-for job. `take` gives `None` when the handler
/// never answered `Ok` (a layer acknowledged the job without it).
pub(crate) type ReplySlot = Slot<Filled>;

impl ReplySlot {
    /// Serializes `output` into the slot.
    pub(crate) fn fill<O: Serialize>(&self, output: &O) {
        self.put(
            serde_json::value::to_raw_value(output)
                .map_err(|e| format!("the handler's output did not encode as JSON: {e}")),
        );
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
