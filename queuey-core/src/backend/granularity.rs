//! How delays are rounded to hold queues: to a fixed step, or to buckets that
//! grow geometrically so that lateness stays within a percentage.

use std::fmt;
use std::time::Duration;

/// How a hold rounds a delay up to the delay of a hold queue.
///
/// Each distinct rounded delay is one hold queue on the broker, so the
/// granularity bounds how many a queue has. Rounding is always **up**: a job
/// is never released early.
///
/// - [`Granularity::Fixed`] rounds up to a multiple of a step: at most one
///   step late, but a policy capped at `C` needs up to `C / step` hold
///   queues (a week at 1 s: 604,800).
/// - [`Granularity::Relative`] rounds up to buckets each the longest whole
///   number of steps at most `percent` % past the one before (one step past
///   it where that is less): a delay is late by less than `percent` % of
///   itself or one `step`, and buckets grow with the logarithm of the
///   longest delay (1 s to a week: 131 at 10 %, 60 at 25 %).
///
/// Boundaries are computed in integers from the delay, step and percentage
/// alone, so processes with the same settings agree on the hold queues'
/// names (with other settings they merely use other hold queues).
///
/// A `Duration` converts into a fixed granularity:
///
/// ```
/// use std::time::Duration;
/// use queuey_core::backend::Granularity;
///
/// let fixed: Granularity = Duration::from_secs(1).into();
/// assert_eq!(fixed.round_up_ms(Duration::from_millis(1_500)), 2_000);
///
/// let relative = Granularity::relative(10, Duration::from_secs(1));
/// // Never early, less than 10 % late (or one step, for short delays).
/// let hour = Duration::from_secs(3_600);
/// let rounded = relative.round_up_ms(hour);
/// assert!(rounded >= 3_600_000 && rounded < 3_960_000);
/// // 11.005 s: the bucket after 11 s is 12 s (11 s + 10 % = 12.1 s, down
/// // to a whole step), not 13 s.
/// assert_eq!(relative.round_up_ms(Duration::from_millis(11_005)), 12_000);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// Round up to a multiple of this step (zero or sub-millisecond steps
    /// count as 1 ms).
    Fixed(Duration),
    /// Round up to growing buckets of whole `step`s (see above).
    Relative {
        /// The percentage by which each bucket exceeds the one before: the
        /// most a delay is late, relatively. At least 1.
        percent: u16,
        /// The smallest bucket, and the step every bucket is a multiple of.
        step: Duration,
    },
}

impl Granularity {
    /// A fixed granularity of `step`.
    pub const fn fixed(step: Duration) -> Self {
        Granularity::Fixed(step)
    }

    /// Buckets growing by `percent` % from `step` (a `percent` of 0 counts
    /// as 1).
    pub const fn relative(percent: u16, step: Duration) -> Self {
        Granularity::Relative { percent, step }
    }

    /// The step in whole milliseconds, at least 1.
    fn step_ms(self) -> u128 {
        let step = match self {
            Granularity::Fixed(step) | Granularity::Relative { step, .. } => step,
        };
        u128::from(effective_granularity_ms(step))
    }

    /// `delay` rounded **up** to this granularity, in milliseconds. A zero
    /// delay stays zero (the job needs no hold).
    pub fn round_up_ms(self, delay: Duration) -> u128 {
        let ms = ceil_ms(delay);
        if ms == 0 {
            return 0;
        }
        let step = self.step_ms();
        match self {
            Granularity::Fixed(_) => ms.div_ceil(step) * step,
            Granularity::Relative { percent, .. } => {
                let percent = u128::from(percent.max(1));
                let mut bucket = step;
                while bucket < ms {
                    // Rounded down to a step: up would be late past `percent`.
                    let grown = bucket * (100 + percent) / 100;
                    let next = grown / step * step;
                    bucket = next.max(bucket + step);
                }
                bucket
            }
        }
    }
}

impl From<Duration> for Granularity {
    fn from(step: Duration) -> Self {
        Granularity::Fixed(step)
    }
}

impl Default for Granularity {
    /// A fixed granularity of one second, the first version's default.
    fn default() -> Self {
        Granularity::Fixed(Duration::from_secs(1))
    }
}

impl fmt::Debug for Granularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Granularity::Fixed(step) => write!(f, "Fixed({step:?})"),
            Granularity::Relative { percent, step } => {
                write!(f, "Relative({percent}% from {step:?})")
            }
        }
    }
}

/// The granularity actually used, in whole milliseconds (rounded up, at
/// least 1).
pub fn effective_granularity_ms(granularity: Duration) -> u64 {
    ceil_ms(granularity).clamp(1, u128::from(u64::MAX)) as u64
}

/// A delay rounded **up** (never early) to a multiple of the granularity, in
/// ms; a zero delay stays zero.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::backend::round_up_ms;
///
/// let s = Duration::from_secs(1);
/// assert_eq!(round_up_ms(Duration::from_millis(1), s), 1_000);
/// assert_eq!(round_up_ms(Duration::from_millis(1_000), s), 1_000);
/// assert_eq!(round_up_ms(Duration::from_millis(1_001), s), 2_000);
/// assert_eq!(round_up_ms(Duration::from_micros(1_500), Duration::ZERO), 2);
/// assert_eq!(round_up_ms(Duration::ZERO, s), 0);
/// ```
pub fn round_up_ms(delay: Duration, granularity: Duration) -> u128 {
    Granularity::Fixed(granularity).round_up_ms(delay)
}

pub(super) fn ceil_ms(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn buckets(g: Granularity, up_to: Duration) -> usize {
        let mut count = 0;
        let mut delay = Duration::from_millis(1);
        while delay <= up_to {
            let bucket = g.round_up_ms(delay);
            count += 1;
            delay = Duration::from_millis(bucket as u64 + 1);
        }
        count
    }

    #[test]
    fn a_week_needs_a_bounded_number_of_relative_buckets() {
        let week = Duration::from_secs(7 * 24 * 3_600);
        let second = Duration::from_secs(1);
        assert_eq!(buckets(Granularity::relative(10, second), week), 131);
        assert_eq!(buckets(Granularity::relative(25, second), week), 60);
        assert_eq!(buckets(Granularity::fixed(second), week), 604_800);
    }

    #[test]
    fn small_delays_round_to_the_step_and_buckets_start_there() {
        let g = Granularity::relative(10, Duration::from_secs(1));
        assert_eq!(g.round_up_ms(Duration::ZERO), 0);
        assert_eq!(g.round_up_ms(Duration::from_millis(1)), 1_000);
        assert_eq!(g.round_up_ms(Duration::from_millis(1_000)), 1_000);
        // 1 s + 10 % is 1.1 s, less than a step more: 2 s (one step more).
        assert_eq!(g.round_up_ms(Duration::from_millis(1_001)), 2_000);
        assert_eq!(g.round_up_ms(Duration::from_secs(10)), 10_000);
        // 10 s grows to 11 s; 11 s to 12.1 s, down to a whole step: 12 s.
        assert_eq!(g.round_up_ms(Duration::from_millis(10_001)), 11_000);
        assert_eq!(g.round_up_ms(Duration::from_millis(11_001)), 12_000);
        assert_eq!(g.round_up_ms(Duration::from_millis(11_005)), 12_000);
    }

    #[test]
    fn a_zero_percent_counts_as_one() {
        let g = Granularity::relative(0, Duration::from_millis(1));
        let r = g.round_up_ms(Duration::from_secs(1_000));
        assert!((1_000_000..=1_010_000).contains(&r), "{r}");
    }

    proptest! {
        #[test]
        fn relative_is_never_early_and_late_by_at_most_the_percentage_or_a_step(
            delay_ms in 1u64..3_000_000_000,
            percent in 1u16..200,
            step_ms in 1u64..60_000,
        ) {
            let g = Granularity::relative(percent, Duration::from_millis(step_ms));
            let r = g.round_up_ms(Duration::from_millis(delay_ms));
            let d = u128::from(delay_ms);
            prop_assert!(r >= d);
            prop_assert!(r.is_multiple_of(u128::from(step_ms)));
            // Late by less than `percent` % of the delay, or less than one
            // step where that is more.
            let late = r - d;
            let step = u128::from(step_ms);
            prop_assert!(
                late < step || late * 100 < d * u128::from(percent),
                "delay {d} rounded to {r}: {late} ms late"
            );
        }

        /// The same bound where it is tight: delays of a few steps to a few
        /// thousand, where a percentage of the delay is close to a step.
        #[test]
        fn relative_is_late_by_less_than_the_percentage_near_the_step(
            steps in 1u64..5_000,
            offset in 0u64..60_000,
            percent in 1u16..100,
            step_ms in 1u64..60_000,
        ) {
            let g = Granularity::relative(percent, Duration::from_millis(step_ms));
            let d = u128::from(steps * step_ms + offset % step_ms);
            let r = g.round_up_ms(Duration::from_millis(d as u64));
            prop_assert!(r >= d);
            let late = r - d;
            prop_assert!(
                late < u128::from(step_ms) || late * 100 < d * u128::from(percent),
                "delay {d} rounded to {r}: {late} ms late"
            );
        }

        #[test]
        fn relative_rounding_is_monotone(a in 0u64..3_000_000_000, b in 0u64..3_000_000_000, percent in 1u16..100) {
            let g = Granularity::relative(percent, Duration::from_secs(1));
            let (lo, hi) = (a.min(b), a.max(b));
            prop_assert!(g.round_up_ms(Duration::from_millis(lo)) <= g.round_up_ms(Duration::from_millis(hi)));
        }

        #[test]
        fn fixed_matches_round_up_ms(delay_us in 0u64..10_000_000_000, g_ms in 0u64..100_000) {
            let g = Duration::from_millis(g_ms);
            prop_assert_eq!(
                Granularity::from(g).round_up_ms(Duration::from_micros(delay_us)),
                round_up_ms(Duration::from_micros(delay_us), g)
            );
        }
    }
}
