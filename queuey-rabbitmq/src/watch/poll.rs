//! The watchdog's loop: read the management API every interval, keep each
//! quorum hold of this backend's queues on [the rule](super::stall), and
//! report the holds that stall and the ones that release again.
//!
//! A management API that cannot be read never stops or slows anything
//! else: the loop logs it once at INFO (holds are not watched, and why),
//! tries again every interval at DEBUG, and says at INFO when it can read
//! again. The holds' history is kept across the gap (see the rule for what
//! a gap does to it).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::{Instant, MissedTickBehavior};

use super::api::Api;
use super::endpoint::work_queue_of;
use super::stall::{Change, Rule, Sample, Track};
use super::stalled::{Stalled, StalledHold};
use super::{Declared, REMEDY};

/// The quorum holds of the backend's queues and what the rule made of them.
pub(crate) struct Holds {
    pub(crate) rule: Rule,
    pub(crate) deferred_suffix: String,
    pub(crate) declared: Declared,
    pub(crate) stalled: Arc<Stalled>,
    pub(crate) tracks: HashMap<String, Track>,
}

impl Holds {
    /// Takes one listing of the virtual host's queues, read at `at`.
    pub(crate) fn apply(&mut self, at: Instant, queues: Vec<(String, Sample)>) {
        let mut seen = HashSet::new();
        for (hold, sample) in queues {
            let Some((queue, ttl_ms)) = work_queue_of(&hold, &self.deferred_suffix) else {
                continue;
            };
            if !(self.declared)(queue) {
                continue;
            }
            let queue = queue.to_owned();
            let track = self.tracks.entry(hold.clone()).or_default();
            match track.observe(&self.rule, at, sample) {
                Change::Stalled { since } => {
                    let idle = at.saturating_duration_since(since);
                    tracing::warn!(
                        hold = %hold,
                        queue = %queue,
                        jobs = sample.releasing,
                        delay_ms = ttl_ms,
                        "quorum hold `{hold}` of queue `{queue}` has held {} jobs past their delay \
                         for {} s without releasing any: its dead-letter worker has stopped. The \
                         jobs are kept, not lost, but do not come back until {REMEDY}",
                        sample.releasing,
                        idle.as_secs(),
                    );
                    self.stalled.set(StalledHold {
                        hold: hold.clone(),
                        queue,
                        jobs: sample.releasing,
                        since: SystemTime::now()
                            .checked_sub(idle)
                            .unwrap_or(SystemTime::UNIX_EPOCH),
                    });
                }
                Change::Released => {
                    self.stalled.clear(&hold);
                    tracing::info!(
                        hold = %hold,
                        queue = %queue,
                        jobs = sample.releasing,
                        "quorum hold `{hold}` of queue `{queue}` releases its jobs again"
                    );
                }
                Change::None if track.is_stalled() => {
                    self.stalled.update_jobs(&hold, sample.releasing);
                }
                Change::None => {}
            }
            seen.insert(hold);
        }
        // A hold no longer listed was deleted (or its queue forgotten).
        let gone: Vec<String> = self
            .tracks
            .keys()
            .filter(|hold| !seen.contains(*hold))
            .cloned()
            .collect();
        for hold in gone {
            if self.tracks.remove(&hold).is_some_and(|t| t.is_stalled())
                && let Some(cleared) = self.stalled.clear(&hold)
            {
                tracing::info!(
                    hold = %hold,
                    queue = %cleared.queue,
                    "quorum hold `{hold}` is no longer listed by the management API: no longer \
                     reported as stalled"
                );
            }
        }
    }
}

/// Reads the API every `interval` (the first read one interval after the
/// start) until the task is aborted.
pub(crate) async fn run(api: Api, mut holds: Holds, interval: Duration) {
    let mut ticks = tokio::time::interval_at(Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut away = false;
    loop {
        ticks.tick().await;
        match api.read().await {
            Ok(queues) => {
                if away {
                    tracing::info!(
                        management = %api.base(),
                        "the management API can be read again: quorum holds are watched"
                    );
                    away = false;
                }
                holds.apply(Instant::now(), queues);
            }
            Err(error) if !away => {
                tracing::info!(
                    management = %api.base(),
                    "quorum holds are not watched for stalls: {error}; trying again every {} s",
                    interval.as_secs_f64()
                );
                away = true;
            }
            Err(error) => {
                tracing::debug!(management = %api.base(), "quorum holds not watched: {error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn holds(declared: &'static [&'static str]) -> Holds {
        Holds {
            rule: Rule {
                stall_after: 10 * SECOND,
                max_gap: 6 * SECOND,
            },
            deferred_suffix: ".deferred".to_owned(),
            declared: Arc::new(move |q: &str| declared.contains(&q)),
            stalled: Arc::default(),
            tracks: HashMap::new(),
        }
    }

    fn read(entries: &[(&str, u64)]) -> Vec<(String, Sample)> {
        entries
            .iter()
            .map(|(name, releasing)| {
                (
                    (*name).to_owned(),
                    Sample {
                        releasing: *releasing,
                        messages: *releasing,
                        published: None,
                    },
                )
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_quorum_holds_of_declared_queues_are_reported_and_cleared() {
        let mut holds = holds(&["mine"]);
        let listing = [
            ("mine", 0),
            ("mine.deferred.quorum.1000", 40),
            ("mine.deferred.1000", 40),
            ("theirs.deferred.quorum.1000", 40),
        ];
        for _ in 0..6 {
            holds.apply(Instant::now(), read(&listing));
            tokio::time::advance(2 * SECOND).await;
        }
        let stalled = holds.stalled.list();
        assert_eq!(stalled.len(), 1, "{stalled:?}");
        assert_eq!(stalled[0].hold, "mine.deferred.quorum.1000");
        assert_eq!(stalled[0].queue, "mine");
        assert_eq!(stalled[0].jobs, 40);
        assert_eq!(holds.tracks.len(), 1);

        // The count follows the reads while it stays stalled.
        holds.apply(Instant::now(), read(&[("mine.deferred.quorum.1000", 55)]));
        assert_eq!(holds.stalled.list()[0].jobs, 55);

        tokio::time::advance(2 * SECOND).await;
        holds.apply(Instant::now(), read(&[("mine.deferred.quorum.1000", 0)]));
        assert!(holds.stalled.list().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_hold_that_disappears_is_no_longer_reported() {
        let mut holds = holds(&["mine"]);
        for _ in 0..6 {
            holds.apply(Instant::now(), read(&[("mine.deferred.quorum.1000", 3)]));
            tokio::time::advance(2 * SECOND).await;
        }
        assert_eq!(holds.stalled.list().len(), 1);
        holds.apply(Instant::now(), read(&[]));
        assert!(holds.stalled.list().is_empty());
        assert!(holds.tracks.is_empty());
    }
}
