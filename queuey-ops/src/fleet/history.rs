//! What the fleet did, minute by minute, folded from the workers'
//! heartbeats: for the dashboard's charts and its `/metrics`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::AddAssign;
use std::sync::Mutex;

use queuey_core::Uuid;
use queuey_core::control::{Heartbeat, QueueTotals};
use serde::Serialize;

/// Minutes of history kept.
pub(crate) const MINUTES: usize = 60;

/// How long a worker not heard from is remembered.
const FORGET_AFTER_MS: i64 = 10 * 60_000;

/// Jobs settled, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    pub(crate) finished: u64,
    pub(crate) retried: u64,
    pub(crate) deferred: u64,
    pub(crate) dead_lettered: u64,
}

impl Counts {
    fn of(t: &QueueTotals) -> Counts {
        Counts {
            finished: t.finished,
            retried: t.retried,
            deferred: t.deferred,
            dead_lettered: t.dead_lettered,
        }
    }

    /// What `self` has beyond `before` (a count that went down, afresh).
    fn since(self, before: Counts) -> Counts {
        let d = |now: u64, then: u64| if now >= then { now - then } else { now };
        Counts {
            finished: d(self.finished, before.finished),
            retried: d(self.retried, before.retried),
            deferred: d(self.deferred, before.deferred),
            dead_lettered: d(self.dead_lettered, before.dead_lettered),
        }
    }

    /// Every outcome added up, at most `u64::MAX`.
    pub(crate) fn sum(&self) -> u64 {
        self.finished
            .saturating_add(self.retried)
            .saturating_add(self.deferred)
            .saturating_add(self.dead_lettered)
    }
}

/// Adds each outcome's count, saturating (heartbeats are untrusted input).
impl AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.finished = self.finished.saturating_add(o.finished);
        self.retried = self.retried.saturating_add(o.retried);
        self.deferred = self.deferred.saturating_add(o.deferred);
        self.dead_lettered = self.dead_lettered.saturating_add(o.dead_lettered);
    }
}

/// The fleet's history, fed with each sample of the workers' heartbeats.
#[derive(Debug, Default)]
pub(crate) struct History {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// When the first sample was taken (earlier work is not counted).
    first_ms: Option<i64>,
    /// Each worker's latest totals, and when it was last heard from.
    last: HashMap<Uuid, (i64, HashMap<String, Counts>)>,
    /// Minute (ms since the epoch / 60 000) -> queue -> counts.
    minutes: VecDeque<(i64, BTreeMap<String, Counts>)>,
    /// Since the first sample, per queue: counters that only grow.
    totals: BTreeMap<String, Counts>,
}

impl History {
    pub(crate) fn new() -> Self {
        History::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds in one sample of the workers' heartbeats taken at `now_ms`.
    pub(crate) fn record(&self, workers: &[Heartbeat], now_ms: i64) {
        let mut inner = self.lock();
        let first = *inner.first_ms.get_or_insert(now_ms);
        let minute = now_ms.div_euclid(60_000);
        let mut added: BTreeMap<String, Counts> = BTreeMap::new();
        for beat in workers {
            let now: HashMap<String, Counts> = beat
                .totals
                .iter()
                .map(|t| (t.queue.clone(), Counts::of(t)))
                .collect();
            let started_ms = i64::try_from(beat.started_at_ms).unwrap_or(i64::MAX);
            let before = inner.last.get(&beat.worker_id).map(|(_, c)| c);
            for (queue, counts) in &now {
                let delta = match before {
                    Some(before) => counts.since(before.get(queue).copied().unwrap_or_default()),
                    // New worker: all it did counts if it started since.
                    None if started_ms >= first => *counts,
                    None => Counts::default(),
                };
                if delta != Counts::default() {
                    *added.entry(queue.clone()).or_default() += delta;
                }
            }
            inner.last.insert(beat.worker_id, (now_ms, now));
        }
        inner
            .last
            .retain(|_, (seen, _)| now_ms - *seen <= FORGET_AFTER_MS);
        for (queue, delta) in &added {
            *inner.totals.entry(queue.clone()).or_default() += *delta;
        }
        if inner.minutes.back().is_none_or(|(m, _)| *m != minute) {
            inner.minutes.push_back((minute, BTreeMap::new()));
        }
        if let Some((_, bucket)) = inner.minutes.back_mut() {
            for (queue, delta) in added {
                *bucket.entry(queue).or_default() += delta;
            }
        }
        while inner
            .minutes
            .front()
            .is_some_and(|(m, _)| minute - *m >= MINUTES as i64)
        {
            inner.minutes.pop_front();
        }
    }

    /// `queue`'s last [`MINUTES`] minutes up to `now_ms`, oldest first.
    pub(crate) fn per_minute(&self, queue: &str, now_ms: i64) -> Vec<(i64, Counts)> {
        let inner = self.lock();
        let last = now_ms.div_euclid(60_000);
        (0..MINUTES as i64)
            .rev()
            .map(|ago| {
                let minute = last - ago;
                let counts = inner
                    .minutes
                    .iter()
                    .find(|(m, _)| *m == minute)
                    .and_then(|(_, b)| b.get(queue).copied())
                    .unwrap_or_default();
                (minute * 60_000, counts)
            })
            .collect()
    }

    /// Per queue, everything counted since the first sample.
    pub(crate) fn totals(&self) -> BTreeMap<String, Counts> {
        self.lock().totals.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(id: Uuid, started: u64, finished: u64, dead: u64) -> Heartbeat {
        Heartbeat {
            worker_id: id,
            host: "h".into(),
            name: None,
            pid: 1,
            version: "0".into(),
            queues: vec!["q".into()],
            paused: vec![],
            concurrency: 1,
            connection: "connected".into(),
            started_at_ms: started,
            at_ms: 0,
            interval_ms: 5_000,
            stopping: false,
            running: vec![],
            totals: vec![QueueTotals {
                queue: "q".into(),
                finished,
                dead_lettered: dead,
                ..QueueTotals::default()
            }],
            limits: vec![],
        }
    }

    #[test]
    fn deltas_land_in_their_minute_and_totals_only_grow() {
        let history = History::new();
        let (old, young) = (Uuid::new_v4(), Uuid::new_v4());
        // The old worker's past is not counted; its progress is.
        history.record(&[beat(old, 0, 100, 0)], 600_000);
        history.record(&[beat(old, 0, 110, 1)], 610_000);
        // A worker started after the first sample counts from zero.
        history.record(&[beat(old, 0, 115, 1), beat(young, 650_000, 4, 0)], 670_000);
        let minutes = history.per_minute("q", 670_000);
        assert_eq!(minutes.len(), MINUTES);
        assert_eq!(minutes[MINUTES - 1].0, 660_000);
        assert_eq!(minutes[MINUTES - 1].1.finished, 9);
        assert_eq!(minutes[MINUTES - 2].1.finished, 10);
        assert_eq!(minutes[MINUTES - 2].1.dead_lettered, 1);
        let totals = history.totals();
        assert_eq!(totals["q"].finished, 19);
        // The old worker stops: the totals stay.
        history.record(&[beat(young, 650_000, 5, 0)], 680_000);
        assert_eq!(history.totals()["q"].finished, 20);
    }

    #[test]
    fn the_largest_totals_add_up_without_overflowing() {
        let history = History::new();
        let max = |id| {
            let mut beat = beat(id, 1_000, u64::MAX, u64::MAX);
            beat.totals[0].retried = u64::MAX;
            beat.totals[0].deferred = u64::MAX;
            beat
        };
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        history.record(&[beat(a, 0, 0, 0)], 0);
        // Two workers started since the first sample, each at the top.
        history.record(&[max(a), max(b)], 1_000);
        history.record(&[max(a), max(b), max(Uuid::new_v4())], 2_000);
        let totals = history.totals()["q"];
        assert_eq!(totals.finished, u64::MAX);
        assert_eq!(totals.dead_lettered, u64::MAX);
        assert_eq!(totals.sum(), u64::MAX);
        let minutes = history.per_minute("q", 2_000);
        assert_eq!(minutes[MINUTES - 1].1.sum(), u64::MAX);
    }

    #[test]
    fn old_minutes_fall_off() {
        let history = History::new();
        let id = Uuid::new_v4();
        history.record(&[beat(id, 0, 0, 0)], 0);
        history.record(&[beat(id, 0, 1, 0)], 1_000);
        let later = (MINUTES as i64 + 5) * 60_000;
        assert!(
            history
                .per_minute("q", later)
                .iter()
                .all(|(_, c)| c.sum() == 0)
        );
        assert_eq!(history.totals()["q"].finished, 1);
    }
}
