//! What a fleet's commands add up to: the paused queues and the cancelled
//! jobs.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::command::{CancelFilter, Command, ControlRecord, Payload};
use crate::Envelope;

/// The most cancel filters a state holds at once; one past it is not
/// applied (a warning says so), as every job is checked against them.
pub const MAX_CANCEL_FILTERS: usize = 1_000;

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
    /// Cancelled job -> when it was cancelled, and by which record.
    cancelled: HashMap<Uuid, Sent>,
    /// Cancellations by filter.
    filters: Filters,
}

/// When a command was sent, and in which record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    at_ms: u64,
    record: Uuid,
}

/// One live cancellation, as [`ControlState::cancellations_sent`] lists
/// it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Cancellation<'a> {
    /// The id of the record that sent it: what
    /// [`Command::Revoke`] names to withdraw it.
    pub record: Uuid,
    /// When it was sent, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What it cancels.
    pub target: CancelTarget<'a>,
}

/// What a [`Cancellation`] cancels.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CancelTarget<'a> {
    /// One job, by its id.
    Job(Uuid),
    /// The jobs a filter matches.
    Filter(&'a CancelFilter),
}

impl ControlState {
    /// Applies one record. Returns whether anything changed.
    pub fn apply(&mut self, record: &ControlRecord) -> bool {
        let sent = Sent {
            at_ms: record.at_ms,
            record: record.id,
        };
        match &record.command {
            Command::Cancel { job_id } => self.cancelled.insert(*job_id, sent).is_none(),
            Command::CancelMatching { filter } => self.filters.insert(filter, sent),
            Command::Pause { queue } => self.paused.insert(queue.clone(), record.at_ms).is_none(),
            Command::Resume { queue } => self.paused.remove(queue).is_some(),
            Command::Revoke { record } => {
                let before = self.cancelled.len();
                self.cancelled.retain(|_, sent| sent.record != *record);
                let by_filter = self.filters.remove(*record);
                by_filter || self.cancelled.len() != before
            }
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

    /// Whether the job of `envelope` was cancelled, by id or by a filter
    /// (only those that can match it, the payload parsed at most once).
    pub fn is_cancelled(&self, envelope: &Envelope) -> bool {
        self.cancelled.contains_key(&envelope.job_id) || self.filters.match_any(envelope)
    }

    /// Whether the job with this id was cancelled by its id.
    pub fn is_cancelled_id(&self, job_id: Uuid) -> bool {
        self.cancelled.contains_key(&job_id)
    }

    /// How many jobs were cancelled by id, and how many filters cancel.
    pub fn cancellations(&self) -> (usize, usize) {
        (self.cancelled.len(), self.filters.len)
    }

    /// Every live cancellation, oldest first.
    pub fn cancellations_sent(&self) -> Vec<Cancellation<'_>> {
        let mut all: Vec<Cancellation<'_>> = self
            .cancelled
            .iter()
            .map(|(job, sent)| Cancellation {
                record: sent.record,
                at_ms: sent.at_ms,
                target: CancelTarget::Job(*job),
            })
            .chain(self.filters.iter().map(|(filter, sent)| Cancellation {
                record: sent.record,
                at_ms: sent.at_ms,
                target: CancelTarget::Filter(filter),
            }))
            .collect();
        all.sort_by_key(|c| (c.at_ms, c.record));
        all
    }

    /// Records that, applied in order to an empty state, give this one (what
    /// a snapshot carries): a pause per paused queue and every live
    /// cancellation under its own record's id and time, so a
    /// [`Command::Revoke`] naming it still withdraws it.
    ///
    /// ```
    /// use queuey_core::control::{Command, ControlRecord, ControlState};
    /// use uuid::Uuid;
    ///
    /// let mut state = ControlState::default();
    /// state.apply(&ControlRecord::new(Command::Pause { queue: "app.emails".into() }));
    /// state.apply(&ControlRecord::new(Command::Cancel { job_id: Uuid::new_v4() }));
    /// let mut copy = ControlState::default();
    /// for record in state.records() {
    ///     copy.apply(&record);
    /// }
    /// assert_eq!(copy.records(), state.records());
    /// ```
    pub fn records(&self) -> Vec<ControlRecord> {
        let pauses = self.paused.iter().map(|(queue, at_ms)| ControlRecord {
            // A pause is kept by its queue alone; its id is derived, so
            // the same state always gives the same records.
            id: Uuid::new_v5(
                &Uuid::NAMESPACE_OID,
                format!("pause:{queue}:{at_ms}").as_bytes(),
            ),
            at_ms: *at_ms,
            by: None,
            command: Command::Pause {
                queue: queue.clone(),
            },
        });
        let cancellations = self
            .cancellations_sent()
            .into_iter()
            .map(|c| ControlRecord {
                id: c.record,
                at_ms: c.at_ms,
                by: None,
                command: match c.target {
                    CancelTarget::Job(job_id) => Command::Cancel { job_id },
                    CancelTarget::Filter(filter) => Command::CancelMatching {
                        filter: filter.clone(),
                    },
                },
            });
        pauses.chain(cancellations).collect()
    }

    /// Forgets cancellations sent before `cutoff_ms`; pauses are kept until
    /// resumed.
    pub fn forget_before(&mut self, cutoff_ms: u64) {
        self.cancelled.retain(|_, sent| sent.at_ms >= cutoff_ms);
        self.filters.retain(|sent| sent.at_ms >= cutoff_ms);
    }
}

/// The cancel filters, indexed by the queue and job type they name.
#[derive(Debug, Clone, Default)]
struct Filters {
    /// Filters naming a queue, by that queue.
    by_queue: HashMap<String, ByType>,
    /// Filters naming no queue.
    any_queue: ByType,
    len: usize,
    /// Whether the cap was met since a filter was last removed (one warning).
    capped: bool,
}

#[derive(Debug, Clone, Default)]
struct ByType {
    by_type: HashMap<String, Vec<(CancelFilter, Sent)>>,
    any_type: Vec<(CancelFilter, Sent)>,
}

impl ByType {
    fn slot(&mut self, job_type: Option<&str>) -> &mut Vec<(CancelFilter, Sent)> {
        match job_type {
            Some(t) => self.by_type.entry(t.to_owned()).or_default(),
            None => &mut self.any_type,
        }
    }

    fn candidates<'a>(
        &'a self,
        job_type: &str,
    ) -> impl Iterator<Item = &'a (CancelFilter, Sent)> + 'a {
        self.by_type
            .get(job_type)
            .into_iter()
            .flatten()
            .chain(self.any_type.iter())
    }

    fn all(&self) -> impl Iterator<Item = &(CancelFilter, Sent)> {
        self.by_type.values().flatten().chain(self.any_type.iter())
    }

    fn retain(&mut self, mut keep: impl FnMut(&(CancelFilter, Sent)) -> bool) -> usize {
        let mut removed = 0;
        for list in self.by_type.values_mut().chain([&mut self.any_type]) {
            let before = list.len();
            list.retain(&mut keep);
            removed += before - list.len();
        }
        self.by_type.retain(|_, list| !list.is_empty());
        removed
    }
}

impl Filters {
    fn insert(&mut self, filter: &CancelFilter, sent: Sent) -> bool {
        let by_type = match &filter.queue {
            Some(q) => self.by_queue.entry(q.clone()).or_default(),
            None => &mut self.any_queue,
        };
        let slot = by_type.slot(filter.job_type.as_deref());
        if slot.iter().any(|(f, _)| f == filter) {
            return false;
        }
        if self.len >= MAX_CANCEL_FILTERS {
            if !std::mem::replace(&mut self.capped, true) {
                tracing::warn!(
                    limit = MAX_CANCEL_FILTERS,
                    record = %sent.record,
                    "too many cancel filters at once; this one and later ones are not applied \
                     until older ones are revoked or forgotten"
                );
            }
            return false;
        }
        slot.push((filter.clone(), sent));
        self.len += 1;
        true
    }

    fn match_any(&self, envelope: &Envelope) -> bool {
        if self.len == 0 {
            return false;
        }
        let mut payload = Payload::new(envelope);
        let base = crate::shard::parse_shard_name(&envelope.queue).map(|(base, _)| base);
        let by_queue = [Some(envelope.queue.as_str()), base]
            .into_iter()
            .flatten()
            .filter_map(|q| self.by_queue.get(q));
        by_queue
            .chain([&self.any_queue])
            .flat_map(|by_type| by_type.candidates(&envelope.job_type))
            .any(|(filter, _)| filter.matches_with(envelope, &mut payload))
    }

    fn iter(&self) -> impl Iterator<Item = &(CancelFilter, Sent)> {
        self.by_queue
            .values()
            .chain([&self.any_queue])
            .flat_map(ByType::all)
    }

    fn remove(&mut self, record: Uuid) -> bool {
        self.retain(|sent| sent.record != record)
    }

    fn retain(&mut self, keep: impl Fn(&Sent) -> bool) -> bool {
        let mut removed = self.any_queue.retain(|(_, sent)| keep(sent));
        for by_type in self.by_queue.values_mut() {
            removed += by_type.retain(|(_, sent)| keep(sent));
        }
        self.by_queue
            .retain(|_, t| !(t.by_type.is_empty() && t.any_type.is_empty()));
        self.len -= removed;
        if removed > 0 {
            self.capped = false;
        }
        removed > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(job_type: &str, queue: &str, payload: serde_json::Value) -> Envelope {
        Envelope::new(
            job_type,
            queue,
            serde_json::value::to_raw_value(&payload).unwrap(),
        )
    }

    fn sent(command: Command, at_ms: u64) -> ControlRecord {
        let mut record = ControlRecord::new(command);
        record.at_ms = at_ms;
        record
    }

    #[test]
    fn cancellations_are_kept_until_forgotten() {
        let mut state = ControlState::default();
        let job = job("t", "q", json!(1));
        let record = sent(Command::Cancel { job_id: job.job_id }, 1_000);
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

    /// A state with two jobs cancelled, `a` by its id at 10 and `b` by a
    /// filter sent at `filter_at_ms`: the state, the jobs, and the records.
    fn two_cancellations(
        filter_at_ms: u64,
    ) -> (
        ControlState,
        Envelope,
        Envelope,
        ControlRecord,
        ControlRecord,
    ) {
        let mut state = ControlState::default();
        let a = job("send", "app.emails", json!({"campaign": 1}));
        let b = job("send", "app.emails", json!({"campaign": 2}));
        let by_id = sent(Command::Cancel { job_id: a.job_id }, 10);
        let filter = CancelFilter::new()
            .payload_equals("campaign", 2)
            .enqueued_before(u64::MAX);
        let by_filter = sent(Command::CancelMatching { filter }, filter_at_ms);
        state.apply(&by_id);
        state.apply(&by_filter);
        (state, a, b, by_id, by_filter)
    }

    #[test]
    fn the_records_of_a_state_rebuild_it_and_a_revoke_still_reaches_them() {
        let (mut state, a, b, _, by_filter) = two_cancellations(11);
        state.apply(&sent(Command::Pause { queue: "q".into() }, 12));
        state.apply(&sent(Command::Pause { queue: "r".into() }, 13));
        state.apply(&sent(Command::Resume { queue: "r".into() }, 14));

        let mut copy = ControlState::default();
        for record in state.records() {
            assert!(copy.apply(&record));
        }
        assert_eq!(copy.paused().collect::<Vec<_>>(), [("q", 12)]);
        assert!(copy.is_cancelled(&a) && copy.is_cancelled(&b));
        assert_eq!(copy.cancellations_sent(), state.cancellations_sent());
        assert_eq!(
            copy.records(),
            state.records(),
            "the same state, the same records"
        );

        copy.apply(&sent(
            Command::Revoke {
                record: by_filter.id,
            },
            15,
        ));
        assert!(copy.is_cancelled(&a) && !copy.is_cancelled(&b));
        copy.forget_before(11);
        assert!(!copy.is_cancelled(&a), "a cancellation keeps its time");
        assert!(ControlState::default().records().is_empty());
    }

    #[test]
    fn a_revoke_withdraws_the_cancellation_of_its_record_only() {
        let (mut state, a, b, by_id, by_filter) = two_cancellations(10);
        assert!(state.is_cancelled(&a) && state.is_cancelled(&b));
        assert_eq!(state.cancellations_sent().len(), 2);

        assert!(state.apply(&sent(
            Command::Revoke {
                record: by_filter.id
            },
            11
        )));
        assert!(state.is_cancelled(&a) && !state.is_cancelled(&b));
        assert!(state.apply(&sent(Command::Revoke { record: by_id.id }, 12)));
        assert!(!state.is_cancelled(&a));
        assert_eq!(state.cancellations(), (0, 0));
        assert!(
            !state.apply(&sent(Command::Revoke { record: by_id.id }, 13)),
            "revoking twice changes nothing"
        );
    }

    #[test]
    fn filters_are_found_by_queue_type_and_shard() {
        let mut state = ControlState::default();
        let on = |queue: Option<&str>, job_type: Option<&str>| {
            let mut f = CancelFilter::new().enqueued_before(u64::MAX);
            f.queue = queue.map(str::to_owned);
            f.job_type = job_type.map(str::to_owned);
            sent(Command::CancelMatching { filter: f }, 1)
        };
        state.apply(&on(Some("app.emails"), None));
        assert!(state.is_cancelled(&job("x", "app.emails", json!(0))));
        assert!(state.is_cancelled(&job("x", "app.emails.s2", json!(0))));
        assert!(!state.is_cancelled(&job("x", "app.other", json!(0))));
        state.apply(&on(None, Some("export")));
        assert!(state.is_cancelled(&job("export", "app.other", json!(0))));
        assert!(!state.is_cancelled(&job("import", "app.other", json!(0))));
        state.apply(&on(Some("app.other"), Some("import")));
        assert!(state.is_cancelled(&job("import", "app.other", json!(0))));
        assert!(!state.is_cancelled(&job("import", "app.third", json!(0))));
        assert_eq!(state.cancellations(), (0, 3));
    }

    #[test]
    fn filters_past_the_cap_are_not_applied() {
        let mut state = ControlState::default();
        for i in 0..MAX_CANCEL_FILTERS {
            let f = CancelFilter::new()
                .job_type(format!("t{i}"))
                .enqueued_before(u64::MAX);
            assert!(state.apply(&sent(Command::CancelMatching { filter: f }, 5)));
        }
        let extra = CancelFilter::new()
            .job_type("extra")
            .enqueued_before(u64::MAX);
        let extra = sent(Command::CancelMatching { filter: extra }, 6);
        assert!(!state.apply(&extra));
        assert!(!state.is_cancelled(&job("extra", "q", json!(0))));
        // Forgetting old ones makes room again.
        state.forget_before(6);
        assert!(state.apply(&extra));
        assert!(state.is_cancelled(&job("extra", "q", json!(0))));
    }
}
