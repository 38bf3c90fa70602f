//! Whether a quorum hold has stopped releasing its jobs, decided from a
//! series of reads of its statistics. Pure: no I/O, time given by the
//! caller.
//!
//! The rule: a hold is **stalled** once, for the whole stall window, it
//! held jobs whose delay was over (its *releasing* figure, `messages −
//! messages_ready − messages_unacknowledged`, stayed above 0) and made no
//! progress. Between two reads a hold made progress when
//!
//! - its releasing figure fell (a backlog being released), or
//! - where the API reports how many jobs were published into the hold, at
//!   least as many jobs left it as were waiting for release at the earlier
//!   read (and at least one). A working dead-letter worker moves a job
//!   back within moments of its delay ending, so under a steady flow the
//!   jobs due at one read are gone by the next even when the figure, read
//!   at another instant, is no lower. A stalled hold releases none: jobs
//!   only arrive, and its figure only grows.
//!
//! A stalled hold clears as soon as it makes progress or its figure is 0
//! again. Two reads further apart than the gap bound (the API was away)
//! restart the window of a hold that is not stalled yet: what happened
//! between them is unknown, and a false alarm would send an operator to
//! restart a healthy hold.
//! A hold already stalled stays so until it makes progress.

use std::time::Duration;

use tokio::time::Instant;

/// One read of a hold's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Jobs past their delay, not moved back yet.
    pub(crate) releasing: u64,
    /// Every job the broker counts in the hold.
    pub(crate) messages: u64,
    /// Jobs published into the hold since it was created or its
    /// statistics were reset, when the API reports it.
    pub(crate) published: Option<u64>,
}

impl Sample {
    /// A read without publish counts.
    #[cfg(test)]
    fn releasing(releasing: u64) -> Sample {
        Sample {
            releasing,
            messages: releasing,
            published: None,
        }
    }
}

/// The bounds of the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    /// How long a hold may go without progress while it holds expired
    /// jobs before it counts as stalled.
    pub(crate) stall_after: Duration,
    /// Reads further apart than this restart the window.
    pub(crate) max_gap: Duration,
}

/// What a read changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing to report.
    None,
    /// The hold just became stalled; it has made no progress since `since`.
    Stalled { since: Instant },
    /// A stalled hold released jobs again (or holds none past their delay).
    Released,
}

/// One hold's history, as far as the rule needs it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Track {
    last: Option<(Instant, Sample)>,
    /// The start of the current stretch without progress, while the hold
    /// holds expired jobs.
    since: Option<Instant>,
    stalled: bool,
}

impl Track {
    /// Takes the read made at `at` into account.
    pub(crate) fn observe(&mut self, rule: &Rule, at: Instant, sample: Sample) -> Change {
        let previous = self.last.replace((at, sample));
        if sample.releasing == 0 {
            self.since = None;
            return self.release();
        }
        let progress = previous.is_some_and(|(_, earlier)| progressed(&earlier, &sample));
        if progress {
            self.since = Some(at);
            return self.release();
        }
        let gap =
            previous.is_none_or(|(then, _)| at.saturating_duration_since(then) > rule.max_gap);
        if gap && !self.stalled {
            self.since = Some(at);
            return Change::None;
        }
        let since = *self.since.get_or_insert(at);
        if !self.stalled && at.saturating_duration_since(since) >= rule.stall_after {
            self.stalled = true;
            return Change::Stalled { since };
        }
        Change::None
    }

    /// Whether the hold counts as stalled now.
    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled
    }

    fn release(&mut self) -> Change {
        if std::mem::take(&mut self.stalled) {
            Change::Released
        } else {
            Change::None
        }
    }
}

/// Whether the hold made progress between the two reads.
fn progressed(earlier: &Sample, later: &Sample) -> bool {
    if later.releasing < earlier.releasing {
        return true;
    }
    let (Some(before), Some(after)) = (earlier.published, later.published) else {
        return false;
    };
    // A counter that went back (statistics reset) tells nothing.
    if after < before {
        return false;
    }
    let arrived = i128::from(after - before);
    let left = arrived - (i128::from(later.messages) - i128::from(earlier.messages));
    left > 0 && left >= i128::from(earlier.releasing)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn rule() -> Rule {
        Rule {
            stall_after: 60 * SECOND,
            max_gap: 90 * SECOND,
        }
    }

    /// Feeds `figures` one read every `every`, from now, returning the
    /// change each read made.
    async fn feed(track: &mut Track, every: Duration, samples: &[Sample]) -> Vec<Change> {
        let mut changes = Vec::new();
        for sample in samples {
            changes.push(track.observe(&rule(), Instant::now(), *sample));
            tokio::time::advance(every).await;
        }
        changes
    }

    fn figures(values: &[u64]) -> Vec<Sample> {
        values.iter().map(|v| Sample::releasing(*v)).collect()
    }

    fn stalled_at(changes: &[Change]) -> Option<usize> {
        changes
            .iter()
            .position(|c| matches!(c, Change::Stalled { .. }))
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_with_nothing_due_is_never_stalled() {
        let mut track = Track::default();
        let changes = feed(&mut track, 30 * SECOND, &figures(&[0; 20])).await;
        assert!(changes.iter().all(|c| *c == Change::None), "{changes:?}");
        assert!(!track.is_stalled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_flat_figure_above_zero_for_less_than_the_window_is_not_stalled() {
        let mut track = Track::default();
        // Reads at 0, 30 and 59 s: 59 s without progress.
        for pause in [0, 30, 29] {
            tokio::time::advance(pause * SECOND).await;
            let change = track.observe(&rule(), Instant::now(), Sample::releasing(7));
            assert_eq!(change, Change::None);
        }
        assert!(!track.is_stalled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_flat_figure_above_zero_for_the_window_is_stalled_once() {
        let mut track = Track::default();
        let start = Instant::now();
        let changes = feed(&mut track, 30 * SECOND, &figures(&[7, 7, 7, 7, 7])).await;
        assert_eq!(stalled_at(&changes), Some(2), "{changes:?}");
        assert_eq!(changes[2], Change::Stalled { since: start });
        assert!(changes[3..].iter().all(|c| *c == Change::None));
        assert!(track.is_stalled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_rising_figure_is_no_progress() {
        let mut track = Track::default();
        let changes = feed(&mut track, 30 * SECOND, &figures(&[3, 50, 400])).await;
        assert_eq!(stalled_at(&changes), Some(2), "{changes:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_falling_figure_is_a_backlog_being_released() {
        let mut track = Track::default();
        let falling = [20_000, 15_000, 9_000, 4_000, 100, 0];
        let changes = feed(&mut track, 30 * SECOND, &figures(&falling)).await;
        assert!(changes.iter().all(|c| *c == Change::None), "{changes:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_fall_restarts_the_window() {
        let mut track = Track::default();
        // Flat for 30 s, falls, then flat for 30 s: never 60 s without
        // progress.
        let changes = feed(&mut track, 30 * SECOND, &figures(&[9, 9, 8, 8])).await;
        assert_eq!(stalled_at(&changes), None, "{changes:?}");
        // Flat 30 s more: 60 s since the fall.
        let changes = feed(&mut track, 30 * SECOND, &figures(&[8])).await;
        assert_eq!(stalled_at(&changes), Some(0), "{changes:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_hold_clears_when_it_releases_or_empties() {
        let mut track = Track::default();
        let changes = feed(&mut track, 30 * SECOND, &figures(&[5, 5, 5, 4])).await;
        assert!(matches!(changes[2], Change::Stalled { .. }), "{changes:?}");
        assert_eq!(changes[3], Change::Released);
        assert!(!track.is_stalled());

        let mut track = Track::default();
        let changes = feed(&mut track, 30 * SECOND, &figures(&[5, 9, 12, 0, 0])).await;
        assert!(matches!(changes[2], Change::Stalled { .. }), "{changes:?}");
        assert_eq!(changes[3], Change::Released);
        assert_eq!(changes[4], Change::None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gap_in_the_reads_restarts_the_window_of_a_hold_not_yet_stalled() {
        let mut track = Track::default();
        let mut changes = feed(&mut track, 30 * SECOND, &figures(&[6, 6])).await;
        // The API is away for five minutes.
        tokio::time::advance(300 * SECOND).await;
        changes.extend(feed(&mut track, 30 * SECOND, &figures(&[6, 6])).await);
        assert_eq!(stalled_at(&changes), None, "{changes:?}");
        changes.extend(feed(&mut track, 30 * SECOND, &figures(&[6])).await);
        assert_eq!(stalled_at(&changes), Some(4), "{changes:?}");

        // A hold stalled before the gap stays stalled across it.
        tokio::time::advance(300 * SECOND).await;
        let after = feed(&mut track, 30 * SECOND, &figures(&[6])).await;
        assert_eq!(after, [Change::None]);
        assert!(track.is_stalled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_flow_through_a_working_hold_is_progress_whatever_the_figure() {
        // 100 jobs a second through a hold; each read sees a few dozen
        // between expiry and release, never lower than the read before.
        let mut track = Track::default();
        let samples: Vec<Sample> = (0..10u64)
            .map(|i| Sample {
                releasing: 20 + i,
                messages: 3_000 + 20 + i,
                published: Some(i * 3_000),
            })
            .collect();
        let changes = feed(&mut track, 30 * SECOND, &samples).await;
        assert_eq!(stalled_at(&changes), None, "{changes:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn jobs_published_into_a_stalled_hold_are_no_progress() {
        // Jobs keep arriving, none leave; the two counters lag each other
        // by a few seconds' worth of jobs, which a growing backlog outweighs.
        let mut track = Track::default();
        let samples: Vec<Sample> = (0..6u64)
            .map(|i| Sample {
                releasing: 10 + 300 * i,
                messages: 310 + 300 * i,
                published: Some(310 + 300 * i + if i % 2 == 1 { 40 } else { 0 }),
            })
            .collect();
        let changes = feed(&mut track, 30 * SECOND, &samples).await;
        assert!(stalled_at(&changes).is_some_and(|i| i <= 3), "{changes:?}");
    }

    #[test]
    fn a_counter_that_went_back_tells_nothing() {
        let earlier = Sample {
            releasing: 5,
            messages: 5,
            published: Some(1_000),
        };
        let later = Sample {
            published: Some(10),
            ..earlier
        };
        assert!(!progressed(&earlier, &later));
    }
}
