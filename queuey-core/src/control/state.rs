//! What a fleet's commands add up to: the paused queues and the cancelled
//! jobs.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::command::{CancelFilter, Command, ControlRecord};
use crate::Envelope;

/// The state the commands sent so far add up to, applied in the order they
/// were sent.
///
/// ```
/// use queuey_core::control::{Command, ControlRecord, ControlState};
///
/// let mut state = ControlState::default();
/// state.apply(&ControlRecord::new(Command::Pause { queue: "app.emails".into() }));
/// assert!(state.is_paused("app.emails"));
/// state.apply(&ControlRecord::new(Command::Resume { queue: "app.emails".into() }));
/// assert!(!state.is_paused("app.emails"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ControlState {
    /// Paused queue -> when it was paused.
    paused: BTreeMap<String, u64>,
    /// Cancelled job -> when it was cancelled.
    cancelled: HashMap<Uuid, u64>,
    /// Cancellations by filter, with when they were sent.
    filters: Vec<(CancelFilter, u64)>,
}

impl ControlState {
    /// Applies one record. Returns whether anything changed.
    pub fn apply(&mut self, record: &ControlRecord) -> bool {
        match &record.command {
            Command::Cancel { job_id } => self.cancelled.insert(*job_id, record.at_ms).is_none(),
            Command::CancelMatching { filter } => {
                if self.filters.iter().any(|(f, _)| f == filter) {
                    return false;
                }
                self.filters.push((filter.clone(), record.at_ms));
                true
            }
            Command::Pause { queue } => self.paused.insert(queue.clone(), record.at_ms).is_none(),
            Command::Resume { queue } => self.paused.remove(queue).is_some(),
        }
    }

    /// Whether `queue` (its name on the broker) is paused.
    pub fn is_paused(&self, queue: &str) -> bool {
        self.paused.contains_key(queue)
    }

    /// The paused queues, by name, with when each was paused (milliseconds
    /// since the Unix epoch).
    pub fn paused(&self) -> impl Iterator<Item = (&str, u64)> {
        self.paused.iter().map(|(q, at)| (q.as_str(), *at))
    }

    /// Whether the job of `envelope` was cancelled, by its id or by a
    /// filter.
    pub fn is_cancelled(&self, envelope: &Envelope) -> bool {
        self.cancelled.contains_key(&envelope.job_id)
            || self.filters.iter().any(|(f, _)| f.matches(envelope))
    }

    /// Whether the job with this id was cancelled by its id.
    pub fn is_cancelled_id(&self, job_id: Uuid) -> bool {
        self.cancelled.contains_key(&job_id)
    }

    /// How many jobs were cancelled by id, and how many filters cancel.
    pub fn cancellations(&self) -> (usize, usize) {
        (self.cancelled.len(), self.filters.len())
    }

    /// Forgets cancellations sent before `cutoff_ms`; pauses are kept until
    /// resumed.
    pub fn forget_before(&mut self, cutoff_ms: u64) {
        self.cancelled.retain(|_, at| *at >= cutoff_ms);
        self.filters.retain(|(_, at)| *at >= cutoff_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellations_are_kept_until_forgotten() {
        let mut state = ControlState::default();
        let job = Envelope::new("t", "q", serde_json::value::to_raw_value(&1).unwrap());
        let mut record = ControlRecord::new(Command::Cancel { job_id: job.job_id });
        record.at_ms = 1_000;
        assert!(state.apply(&record));
        assert!(!state.apply(&record), "the same cancellation twice is one");
        assert!(state.is_cancelled(&job));
        state.forget_before(1_000);
        assert!(state.is_cancelled(&job));
        state.forget_before(1_001);
        assert!(!state.is_cancelled(&job));
    }

    #[test]
    fn a_resume_without_a_pause_changes_nothing() {
        let mut state = ControlState::default();
        assert!(!state.apply(&ControlRecord::new(Command::Resume { queue: "q".into() })));
        assert!(state.apply(&ControlRecord::new(Command::Pause { queue: "q".into() })));
        assert!(!state.apply(&ControlRecord::new(Command::Pause { queue: "q".into() })));
        assert_eq!(state.paused().count(), 1);
        state.forget_before(u64::MAX);
        assert!(state.is_paused("q"), "pauses last until resumed");
    }
}
