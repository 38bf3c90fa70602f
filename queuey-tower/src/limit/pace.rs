//! How long a job waits for a running slot: paced from the store's answer,
//! so that the jobs of a busy key come back about as fast as slots free,
//! spread out rather than all at once.
//!
//! The rule, for a key with `limit` slots, `waiting` holders refused
//! lately and a typical hold time `hold`:
//!
//! 1. `rounds = ceil(waiting / limit)`: the holders ahead of this one free
//!    about `limit` slots per hold, so it is served in that many holds;
//! 2. `base = hold * rounds`, with [`Pace::unknown_hold`] for `hold` while
//!    no slot of the key was freed yet, clamped to
//!    [`min`](Pace::min)..=[`max`](Pace::max);
//! 3. the delay is `base` times a random factor between ½ and 3/2, clamped
//!    again: jobs refused together come back spread over a hold, not all
//!    at the same instant. It is never below `min`, so never zero.

use std::time::Duration;

/// The shortest wait for a slot by default.
pub const DEFAULT_MIN_WAIT: Duration = Duration::from_millis(250);

/// The longest wait for a slot by default.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);

/// The hold time assumed by default for a key none of whose slots was freed
/// yet.
pub const DEFAULT_UNKNOWN_HOLD: Duration = Duration::from_secs(1);

/// How long a job waits for a running slot of a key whose slots are all
/// held; see the [module documentation](super#pacing).
///
/// ```
/// use std::time::Duration;
/// use queuey_tower::limit::Pace;
///
/// let pace = Pace::new()
///     .min(Duration::from_millis(500))
///     .max(Duration::from_secs(30))
///     .unknown_hold(Duration::from_secs(2));
/// assert_eq!(pace.get_min(), Duration::from_millis(500));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    min: Duration,
    max: Duration,
    unknown_hold: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace::new()
    }
}

impl Pace {
    /// [`DEFAULT_MIN_WAIT`] to [`DEFAULT_MAX_WAIT`], assuming
    /// [`DEFAULT_UNKNOWN_HOLD`] before a key's first slot is freed.
    pub const fn new() -> Self {
        Pace {
            min: DEFAULT_MIN_WAIT,
            max: DEFAULT_MAX_WAIT,
            unknown_hold: DEFAULT_UNKNOWN_HOLD,
        }
    }

    /// The shortest wait (taken as 1 ms if zero, so a wait is never zero;
    /// a `max` below it is raised to it).
    pub fn min(mut self, min: Duration) -> Self {
        self.min = min.max(Duration::from_millis(1));
        self.max = self.max.max(self.min);
        self
    }

    /// The longest wait (a value below [`min`](Self::min) is taken as
    /// `min`).
    pub fn max(mut self, max: Duration) -> Self {
        self.max = max.max(self.min);
        self
    }

    /// The hold time assumed for a key none of whose slots was freed yet.
    pub fn unknown_hold(mut self, hold: Duration) -> Self {
        self.unknown_hold = hold;
        self
    }

    /// The shortest wait.
    pub fn get_min(&self) -> Duration {
        self.min
    }

    /// The longest wait.
    pub fn get_max(&self) -> Duration {
        self.max
    }

    /// The hold time assumed for a key none of whose slots was freed yet.
    pub fn get_unknown_hold(&self) -> Duration {
        self.unknown_hold
    }

    /// The wait before jitter: a typical hold per round of `limit` waiting
    /// holders ahead, clamped.
    pub(crate) fn base(
        &self,
        limit: u32,
        waiting: u32,
        typical_hold: Option<Duration>,
    ) -> Duration {
        let rounds = waiting.max(1).div_ceil(limit.max(1));
        typical_hold
            .unwrap_or(self.unknown_hold)
            .saturating_mul(rounds)
            .clamp(self.min, self.max)
    }

    /// The wait for a slot, `sample` (in `0.0..1.0`) picking where between
    /// half and one and a half times [`base`](Self::base) it falls.
    pub(crate) fn delay(
        &self,
        limit: u32,
        waiting: u32,
        typical_hold: Option<Duration>,
        sample: f64,
    ) -> Duration {
        spread(self.base(limit, waiting, typical_hold), sample).clamp(self.min, self.max)
    }
}

/// `base` times a factor between ½ and 3/2 picked by `sample` (clamped to
/// `0.0..=1.0`; NaN counts as ½), so that waits given together end apart.
pub(crate) fn spread(base: Duration, sample: f64) -> Duration {
    let sample = if sample.is_nan() {
        0.5
    } else {
        sample.clamp(0.0, 1.0)
    };
    base.mul_f64(0.5 + sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn one_typical_hold_per_round_of_waiting_holders() {
        let pace = Pace::new();
        // Three slots: the first three waiting are served in one hold, the
        // next three in two.
        assert_eq!(pace.base(3, 1, Some(2 * S)), 2 * S);
        assert_eq!(pace.base(3, 3, Some(2 * S)), 2 * S);
        assert_eq!(pace.base(3, 4, Some(2 * S)), 4 * S);
        assert_eq!(pace.base(3, 7, Some(2 * S)), 6 * S);
        // Nobody counted as waiting still waits one hold.
        assert_eq!(pace.base(3, 0, Some(2 * S)), 2 * S);
    }

    #[test]
    fn an_unknown_hold_is_assumed_and_the_base_is_clamped() {
        let pace = Pace::new();
        assert_eq!(pace.base(1, 1, None), DEFAULT_UNKNOWN_HOLD);
        assert_eq!(pace.base(1, 1, Some(Duration::ZERO)), DEFAULT_MIN_WAIT);
        assert_eq!(pace.base(1, 10_000, Some(S)), DEFAULT_MAX_WAIT);
        assert_eq!(
            pace.base(1, u32::MAX, Some(Duration::MAX)),
            DEFAULT_MAX_WAIT
        );
        // A limit of zero is taken as one rather than dividing by it.
        assert_eq!(pace.base(0, 2, Some(S)), 2 * S);
    }

    #[test]
    fn the_jitter_spreads_within_half_to_one_and_a_half_and_never_reaches_zero() {
        let pace = Pace::new();
        assert_eq!(pace.delay(1, 4, Some(S), 0.0), 2 * S);
        assert_eq!(pace.delay(1, 4, Some(S), 0.5), 4 * S);
        assert_eq!(pace.delay(1, 4, Some(S), 1.0), 6 * S);
        assert_eq!(pace.delay(1, 4, Some(S), f64::NAN), 4 * S);
        assert_eq!(pace.delay(1, 4, Some(S), -3.0), 2 * S);
        for sample in [0.0, 0.3, 0.99] {
            let delay = pace.delay(5, 1, Some(Duration::ZERO), sample);
            assert!(delay >= DEFAULT_MIN_WAIT, "{delay:?}");
            assert!(delay < DEFAULT_MIN_WAIT * 3 / 2, "{delay:?}");
        }
        let zero = Pace::new().min(Duration::ZERO);
        assert_eq!(zero.get_min(), Duration::from_millis(1));
        assert!(zero.delay(1, 1, Some(Duration::ZERO), 0.0) > Duration::ZERO);
    }

    #[test]
    fn bounds_stay_ordered() {
        let pace = Pace::new().max(Duration::from_millis(10));
        assert_eq!(pace.get_max(), DEFAULT_MIN_WAIT);
        let pace = Pace::new().min(2 * DEFAULT_MAX_WAIT);
        assert_eq!(pace.get_max(), 2 * DEFAULT_MAX_WAIT);
        assert_eq!(pace.delay(1, 1, Some(S), 0.0), 2 * DEFAULT_MAX_WAIT);
    }
}
