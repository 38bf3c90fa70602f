//! Counts of dead letters grouped by reason fingerprint and by job type.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::dead::DeadLetter;

/// The dead letters of one reason fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The fingerprint.
    pub fingerprint: String,
    /// How many dead letters have it.
    pub count: usize,
    /// One full reason of the group, the oldest.
    pub example_reason: String,
    /// One id of the group, the oldest.
    pub example_id: String,
    /// Counts per job type inside the group.
    pub job_types: BTreeMap<String, usize>,
    /// Position of the oldest one (1 = head of the queue).
    pub first_position: usize,
    /// Position of the newest one.
    pub last_position: usize,
}

/// Dead letters of one job type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TypeCount {
    /// The job type (`(unknown)` for a body that is not an envelope and has
    /// no `type` property).
    pub job_type: String,
    /// How many.
    pub count: usize,
}

/// What `dead stats` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Dead letters read.
    pub total: usize,
    /// How many are not envelopes.
    pub malformed: usize,
    /// Groups by fingerprint, largest first.
    pub by_fingerprint: Vec<Group>,
    /// Counts by job type, largest first.
    pub by_job_type: Vec<TypeCount>,
}

const UNKNOWN_TYPE: &str = "(unknown)";

/// Groups `letters` by fingerprint and by job type.
pub fn stats(letters: &[DeadLetter]) -> Stats {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for letter in letters {
        let job_type = letter.job_type().unwrap_or_else(|| UNKNOWN_TYPE.to_owned());
        *types.entry(job_type.clone()).or_default() += 1;
        let fp = letter.fingerprint();
        let group = groups.entry(fp.clone()).or_insert_with(|| Group {
            fingerprint: fp,
            count: 0,
            example_reason: letter.reason(),
            example_id: letter.id(),
            job_types: BTreeMap::new(),
            first_position: letter.position,
            last_position: letter.position,
        });
        group.count += 1;
        group.last_position = letter.position;
        *group.job_types.entry(job_type).or_default() += 1;
    }
    let mut by_fingerprint: Vec<Group> = groups.into_values().collect();
    by_fingerprint.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.fingerprint.cmp(&b.fingerprint))
    });
    let mut by_job_type: Vec<TypeCount> = types
        .into_iter()
        .map(|(job_type, count)| TypeCount { job_type, count })
        .collect();
    by_job_type.sort_by(|a, b| b.count.cmp(&a.count).then(a.job_type.cmp(&b.job_type)));
    Stats {
        total: letters.len(),
        malformed: letters.iter().filter(|l| l.is_malformed()).count(),
        by_fingerprint,
        by_job_type,
    }
}
