//! Keeping pauses in the stream: a stream drops what is older than its
//! maximum age, but a pause lasts until it is resumed, so a follower
//! publishes a pause again once it is a week old. As pure functions: which
//! pauses are due, and whether a renewal read from the stream still holds.
//!
//! A renewal carries the offset its follower had read up to when it
//! decided ([`RENEWS_AFTER_HEADER`](crate::topology::RENEWS_AFTER_HEADER)).
//! Every follower reads the stream in the same order, so each can tell
//! whether a resume of the same queue came in between (an operator resumed
//! the queue while the renewal was on its way): then the renewal is
//! ignored, everywhere alike, and the resume stands.

use std::collections::HashMap;
use std::time::Duration;

use queuey_core::control::{Command, ControlRecord, ControlState};

/// How old a pause grows before a follower publishes it again: well
/// inside the stream's maximum age of 30 days, so a fleet that has one
/// process following its commands at least once in three weeks keeps its
/// pauses.
pub(crate) const RENEW_PAUSES_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// The paused queues of `state` whose pause is older than
/// [`RENEW_PAUSES_AFTER`] at `now_ms`, with when each was paused.
pub(super) fn due(state: &ControlState, now_ms: u64) -> Vec<(String, u64)> {
    let after = u64::try_from(RENEW_PAUSES_AFTER.as_millis()).unwrap_or(u64::MAX);
    state
        .paused()
        .filter(|(_, at)| now_ms.saturating_sub(*at) >= after)
        .map(|(queue, at)| (queue.to_owned(), at))
        .collect()
}

/// The stream offset of the last resume read, per queue.
#[derive(Debug, Default)]
pub(super) struct Resumes {
    last: HashMap<String, u64>,
    /// The offset of the snapshot the follower started from: resumes up
    /// to it were not read, only their outcome.
    floor: Option<u64>,
}

impl Resumes {
    /// Notes a record read at `offset` (unknown: as late as can be, so no
    /// renewal of that queue can undo it).
    pub(super) fn read(&mut self, record: &ControlRecord, offset: Option<u64>) {
        if let Command::Resume { queue } = &record.command {
            self.last.insert(queue.clone(), offset.unwrap_or(u64::MAX));
        }
    }

    /// Whether `record` is to be applied: anything but a renewal is; a
    /// renewal (`renews_after` set) only if no resume of its queue was read
    /// after the offset its follower had read up to. After a start from a
    /// snapshot, a renewal decided before the snapshot's offset holds only
    /// if the queue is still `paused`: a resume in between is in the
    /// snapshot's outcome, not in what was read.
    pub(super) fn accepts(
        &self,
        record: &ControlRecord,
        renews_after: Option<u64>,
        paused: bool,
    ) -> bool {
        let (Command::Pause { queue }, Some(after)) = (&record.command, renews_after) else {
            return true;
        };
        if self.floor.is_some_and(|floor| after <= floor) && !paused {
            return false;
        }
        self.last.get(queue).is_none_or(|resumed| *resumed <= after)
    }

    /// Forgets every offset: the stream was deleted, and a new one counts
    /// from 0.
    pub(super) fn clear(&mut self) {
        self.last.clear();
        self.floor = None;
    }

    /// Starts over from a snapshot of the state up to offset `of`.
    pub(super) fn start_at_snapshot(&mut self, of: u64) {
        self.last.clear();
        self.floor = Some(of);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 86_400_000;

    fn record(command: Command, at_ms: u64) -> ControlRecord {
        let mut record = ControlRecord::new(command);
        record.at_ms = at_ms;
        record
    }

    fn pause(queue: &str) -> Command {
        Command::Pause {
            queue: queue.into(),
        }
    }

    fn resume(queue: &str) -> Command {
        Command::Resume {
            queue: queue.into(),
        }
    }

    #[test]
    fn pauses_a_week_old_are_due() {
        let now = 100 * DAY_MS;
        let mut state = ControlState::default();
        state.apply(&record(pause("old"), now - 7 * DAY_MS));
        state.apply(&record(pause("young"), now - 7 * DAY_MS + 1));
        state.apply(&record(pause("resumed"), now - 20 * DAY_MS));
        state.apply(&record(resume("resumed"), now - 19 * DAY_MS));
        assert_eq!(due(&state, now), [("old".to_owned(), now - 7 * DAY_MS)]);
        // A renewal applied refreshes the pause's time: not due any more.
        state.apply(&record(pause("old"), now));
        assert!(due(&state, now).is_empty());
    }

    #[test]
    fn a_resume_read_after_the_renewers_offset_wins() {
        let mut resumes = Resumes::default();
        let renewal = record(pause("q"), 0);
        // Nothing resumed: the renewal holds, as does any plain command.
        assert!(resumes.accepts(&renewal, Some(10), false));
        resumes.read(&record(resume("q"), 0), Some(8));
        // The resume was read by the renewer before it decided.
        assert!(resumes.accepts(&renewal, Some(10), false));
        resumes.read(&record(resume("q"), 0), Some(11));
        // The resume came between the decision and the renewal.
        assert!(!resumes.accepts(&renewal, Some(10), false));
        assert!(
            resumes.accepts(&renewal, None, false),
            "a plain pause always holds"
        );
        assert!(resumes.accepts(&record(pause("other"), 0), Some(10), false));
        resumes.read(&record(resume("other"), 0), None);
        assert!(!resumes.accepts(&record(pause("other"), 0), Some(u64::MAX - 1), false));
        resumes.clear();
        assert!(resumes.accepts(&renewal, Some(10), false));
    }

    #[test]
    fn after_a_snapshot_a_renewal_decided_before_it_holds_only_for_a_queue_still_paused() {
        let mut resumes = Resumes::default();
        resumes.read(&record(resume("q"), 0), Some(3));
        resumes.start_at_snapshot(20);
        let renewal = record(pause("q"), 0);
        // Decided at 15: a resume may have come between 15 and 20, and the
        // snapshot shows the queue not paused, so it did.
        assert!(!resumes.accepts(&renewal, Some(15), false));
        // The snapshot shows the queue paused: the renewal only refreshes it.
        assert!(resumes.accepts(&renewal, Some(15), true));
        // Decided after the snapshot: the resumes read since decide.
        assert!(resumes.accepts(&renewal, Some(21), false));
        resumes.read(&record(resume("q"), 0), Some(25));
        assert!(!resumes.accepts(&renewal, Some(21), false));
        assert!(
            resumes.accepts(&record(pause("q"), 0), None, false),
            "a plain pause holds"
        );
        resumes.clear();
        assert!(resumes.accepts(&renewal, Some(15), false));
    }
}
