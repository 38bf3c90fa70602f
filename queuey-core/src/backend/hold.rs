//! A hold's delay for a job: rounded up to the granularity, within the
//! limit every hold shares.

use std::time::Duration;

use super::Granularity;
use crate::Error;
use crate::wait::MAX_DEFERRAL_MS;

/// Rounds `delay` up to the granularity (a `Duration` step or any
/// [`Granularity`]) and checks it against [`MAX_DEFERRAL_MS`]; the error
/// names the queue.
pub fn hold_delay_ms(
    queue: &str,
    delay: Duration,
    granularity: impl Into<Granularity>,
) -> Result<u64, Error> {
    let ms = granularity.into().round_up_ms(delay);
    if ms > u128::from(MAX_DEFERRAL_MS) {
        return Err(Error::DelayTooLong {
            queue: queue.to_owned(),
            delay_ms: ms,
            max_ms: MAX_DEFERRAL_MS,
        });
    }
    // Checked just above: ms fits in u64.
    Ok(ms as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::granularity::{ceil_ms, effective_granularity_ms, round_up_ms};
    use crate::wait::{LONGEST_WAIT, fits_a_hold};
    use proptest::prelude::*;

    #[test]
    fn the_longest_wait_fits_a_hold_at_any_granularity_up_to_20_hours() {
        for secs in [0, 1, 7, 60, 3_600, 20 * 3_600] {
            let g = Duration::from_secs(secs);
            assert!(hold_delay_ms("q", LONGEST_WAIT, g).is_ok(), "{g:?}");
        }
    }

    #[test]
    fn every_wait_check_is_fits_a_hold() {
        use crate::{Backoff, Disposition};
        let one = Duration::from_secs(1);
        for delay in [
            one,
            LONGEST_WAIT - Duration::from_nanos(1),
            LONGEST_WAIT,
            LONGEST_WAIT + Duration::from_nanos(1),
            LONGEST_WAIT + Duration::from_millis(1),
            Duration::MAX,
        ] {
            let fits = fits_a_hold(delay);
            assert_eq!(Backoff::fixed(delay).is_ok(), fits, "{delay:?}");
            assert_eq!(
                Backoff::exponential(one, 2.0, delay).is_ok(),
                fits,
                "{delay:?}"
            );
            for wait in [Disposition::Retry { delay }, Disposition::Defer { delay }] {
                let kept = !matches!(wait.never_early(), Disposition::DeadLetter { .. });
                assert_eq!(kept, fits, "{delay:?}");
            }
        }
    }

    #[test]
    fn granularity_is_clamped_to_one_millisecond() {
        assert_eq!(effective_granularity_ms(Duration::ZERO), 1);
        assert_eq!(effective_granularity_ms(Duration::from_nanos(1)), 1);
        assert_eq!(effective_granularity_ms(Duration::from_micros(999)), 1);
        assert_eq!(effective_granularity_ms(Duration::from_micros(1_001)), 2);
        assert_eq!(effective_granularity_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn the_limit_is_checked_after_rounding() {
        let g = Duration::from_secs(1);
        assert_eq!(
            hold_delay_ms("q", Duration::from_millis(MAX_DEFERRAL_MS), Duration::ZERO).unwrap(),
            MAX_DEFERRAL_MS
        );
        // Just under the cap, but rounding up to whole seconds passes it.
        let e = hold_delay_ms("q", Duration::from_millis(MAX_DEFERRAL_MS - 10), g).unwrap_err();
        assert!(
            matches!(e, Error::DelayTooLong { ref queue, delay_ms: 2_147_484_000, .. } if queue == "q"),
            "{e:?}"
        );
        assert!(hold_delay_ms("q", Duration::MAX, g).is_err());
        assert_eq!(
            hold_delay_ms("q", Duration::from_millis(2_147_483_000), g).unwrap(),
            2_147_483_000
        );
    }

    proptest! {
        #[test]
        fn never_early_and_at_most_one_granule_late(delay_us in 0u64..10_000_000_000, g_ms in 1u64..100_000) {
            let delay = Duration::from_micros(delay_us);
            let g = Duration::from_millis(g_ms);
            let rounded = round_up_ms(delay, g);
            prop_assert!(Duration::from_millis(rounded as u64) >= delay);
            prop_assert!(rounded.is_multiple_of(u128::from(g_ms)));
            prop_assert!(rounded < ceil_ms(delay) + u128::from(g_ms));
        }

        #[test]
        fn rounding_is_monotone(a in 0u64..10_000_000_000, b in 0u64..10_000_000_000, g_ms in 0u64..100_000) {
            let (lo, hi) = (a.min(b), a.max(b));
            let g = Duration::from_millis(g_ms);
            prop_assert!(round_up_ms(Duration::from_micros(lo), g) <= round_up_ms(Duration::from_micros(hi), g));
        }
    }
}
