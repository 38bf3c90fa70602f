//! Counts of dead letters grouped by reason fingerprint and by job type,
//! folded as the queue is read.
//!
//! Only bounded aggregates are kept (the first groups met, from the
//! oldest); letters past a bound are counted under `other_*`, so totals
//! stay exact.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::amqp::Amqp;
use crate::dead::{DeadLetter, DeadQueues, Filter, QueueCount, count_in};
use crate::error::Result;

/// Fingerprint groups kept.
pub(crate) const MAX_GROUPS: usize = 1_000;
/// Job types kept.
pub(crate) const MAX_JOB_TYPES: usize = 1_000;
/// Job types kept per group.
pub(crate) const MAX_GROUP_JOB_TYPES: usize = 20;
/// Characters kept of a group's example reason and of a job type.
pub(crate) const TEXT_MAX_CHARS: usize = 500;

/// The dead letters of one reason fingerprint: the oldest's reason (cut at
/// [`TEXT_MAX_CHARS`]), id and position, the newest's position, and counts
/// per job type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Group {
    pub(crate) fingerprint: String,
    pub(crate) count: usize,
    pub(crate) example_reason: String,
    pub(crate) example_id: String,
    pub(crate) job_types: BTreeMap<String, usize>,
    pub(crate) other_job_types: usize,
    pub(crate) first_position: usize,
    pub(crate) last_position: usize,
}

/// Dead letters of one job type (`(unknown)` without one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TypeCount {
    pub(crate) job_type: String,
    pub(crate) count: usize,
}

/// What `dead stats` reports: groups and job types largest first, and the
/// count per dead-letter queue read (from [`DeadQueues::read_stats`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Stats {
    pub(crate) total: usize,
    pub(crate) malformed: usize,
    pub(crate) by_fingerprint: Vec<Group>,
    pub(crate) other_fingerprints: usize,
    pub(crate) by_job_type: Vec<TypeCount>,
    pub(crate) other_job_types: usize,
    pub(crate) queues: Vec<QueueCount>,
}

const UNKNOWN_TYPE: &str = "(unknown)";

/// Folds dead letters into [`Stats`] one at a time.
#[derive(Debug, Default)]
pub(crate) struct StatsBuilder {
    total: usize,
    malformed: usize,
    groups: BTreeMap<String, Group>,
    other_fingerprints: usize,
    types: BTreeMap<String, usize>,
    other_job_types: usize,
}

impl StatsBuilder {
    pub(crate) fn new() -> Self {
        StatsBuilder::default()
    }

    pub(crate) fn add(&mut self, letter: &DeadLetter) {
        self.total += 1;
        if letter.is_malformed() {
            self.malformed += 1;
        }
        let job_type = match letter.job_type() {
            Some(t) if t.chars().nth(TEXT_MAX_CHARS).is_some() => {
                t.chars().take(TEXT_MAX_CHARS - 1).chain(['…']).collect()
            }
            Some(t) => t,
            None => UNKNOWN_TYPE.to_owned(),
        };
        if !count_in(&mut self.types, &job_type, 1, MAX_JOB_TYPES) {
            self.other_job_types += 1;
        }
        let groups = self.groups.len();
        let group = match self.groups.entry(letter.fingerprint()) {
            Entry::Occupied(group) => group.into_mut(),
            Entry::Vacant(_) if groups >= MAX_GROUPS => {
                self.other_fingerprints += 1;
                return;
            }
            Entry::Vacant(slot) => {
                let fingerprint = slot.key().clone();
                slot.insert(Group {
                    fingerprint,
                    count: 0,
                    example_reason: letter.reason().chars().take(TEXT_MAX_CHARS).collect(),
                    example_id: letter.id(),
                    job_types: BTreeMap::new(),
                    other_job_types: 0,
                    first_position: letter.position,
                    last_position: letter.position,
                })
            }
        };
        group.count += 1;
        group.last_position = letter.position;
        if !count_in(&mut group.job_types, &job_type, 1, MAX_GROUP_JOB_TYPES) {
            group.other_job_types += 1;
        }
    }

    /// The counts, largest groups first.
    pub(crate) fn finish(self) -> Stats {
        let mut by_fingerprint: Vec<Group> = self.groups.into_values().collect();
        by_fingerprint.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.fingerprint.cmp(&b.fingerprint))
        });
        let mut by_job_type: Vec<TypeCount> = self
            .types
            .into_iter()
            .map(|(job_type, count)| TypeCount { job_type, count })
            .collect();
        by_job_type.sort_by(|a, b| b.count.cmp(&a.count).then(a.job_type.cmp(&b.job_type)));
        Stats {
            total: self.total,
            malformed: self.malformed,
            by_fingerprint,
            other_fingerprints: self.other_fingerprints,
            by_job_type,
            other_job_types: self.other_job_types,
            queues: Vec::new(),
        }
    }
}

impl DeadQueues {
    /// Reads every dead-letter queue once and groups the dead letters
    /// that pass `filter`.
    pub(crate) async fn read_stats(&self, amqp: &Amqp, filter: &Filter) -> Result<Stats> {
        self.check_ids(&filter.ids)?;
        let mut builder = StatsBuilder::new();
        let mut per_shard: BTreeMap<Option<u16>, usize> = BTreeMap::new();
        let mut queues = self.counts(amqp).await?;
        self.scan(amqp, None, |letter| {
            if filter.matches(&letter) {
                *per_shard.entry(letter.shard).or_default() += 1;
                builder.add(&letter);
            }
            ControlFlow::Continue(())
        })
        .await?;
        for queue in &mut queues {
            queue.count = per_shard.get(&queue.shard).copied().unwrap_or(0);
        }
        let mut stats = builder.finish();
        stats.queues = queues;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable};

    use super::*;

    fn with_reason(position: usize, reason: &str, kind: &str) -> DeadLetter {
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death-reason".into(),
            AMQPValue::LongString(reason.into()),
        );
        let props = BasicProperties::default()
            .with_headers(headers)
            .with_type(kind.into());
        DeadLetter::new(position, b"not an envelope".to_vec(), props)
    }

    #[test]
    fn distinct_reasons_and_types_past_the_bounds_are_counted_not_kept() {
        let mut builder = StatsBuilder::new();
        let n = MAX_GROUPS + 50;
        // Reasons without digits, so that no two share a fingerprint.
        let word = |i: usize| {
            format!("{}", i)
                .chars()
                .map(|d| char::from(b'a' + d.to_digit(10).unwrap() as u8))
                .collect::<String>()
        };
        for i in 0..n {
            builder.add(&with_reason(
                i + 1,
                &format!("failure {} {}", word(i), "z".repeat(2 * TEXT_MAX_CHARS)),
                &format!("type-{}", word(i)),
            ));
        }
        let stats = builder.finish();
        assert_eq!((stats.total, stats.malformed), (n, n));
        assert_eq!(stats.by_fingerprint.len(), MAX_GROUPS);
        assert_eq!(stats.other_fingerprints, 50);
        assert_eq!(stats.by_job_type.len(), MAX_JOB_TYPES);
        assert_eq!(stats.other_job_types, n - MAX_JOB_TYPES);
        let counted: usize = stats.by_fingerprint.iter().map(|g| g.count).sum();
        assert_eq!(counted + stats.other_fingerprints, n);
        assert!(
            stats
                .by_fingerprint
                .iter()
                .all(|g| g.example_reason.chars().count() == TEXT_MAX_CHARS)
        );
    }

    #[test]
    fn a_group_keeps_a_bounded_number_of_job_types() {
        let mut builder = StatsBuilder::new();
        for i in 0..MAX_GROUP_JOB_TYPES + 5 {
            builder.add(&with_reason(i + 1, "timeout", &format!("t{i:03}")));
        }
        let stats = builder.finish();
        let group = &stats.by_fingerprint[0];
        assert_eq!(group.count, MAX_GROUP_JOB_TYPES + 5);
        assert_eq!(group.job_types.len(), MAX_GROUP_JOB_TYPES);
        assert_eq!(group.other_job_types, 5);
        assert_eq!((group.first_position, group.last_position), (1, 25));
    }

    #[test]
    fn a_long_job_type_is_counted_under_its_start() {
        let mut builder = StatsBuilder::new();
        let long = "t".repeat(3 * TEXT_MAX_CHARS);
        for (position, job_type) in [(1, long.clone()), (2, format!("{long}x"))] {
            let payload = serde_json::value::to_raw_value(&serde_json::json!({})).unwrap();
            let body = queuey_core::Envelope::new(job_type, "q", payload)
                .encode()
                .unwrap();
            builder.add(&DeadLetter::new(position, body, BasicProperties::default()));
        }
        let stats = builder.finish();
        let kept = &stats.by_job_type[0];
        assert_eq!(kept.count, 2);
        assert_eq!(kept.job_type.chars().count(), TEXT_MAX_CHARS);
        assert!(kept.job_type.ends_with('…'));
    }
}
