//! Arithmetic shared by every backend's holds: rounding and the limit.

use std::time::Duration;

use super::Granularity;
use crate::Error;

/// The longest delay a hold accepts: 2^31 − 1 ms, about 24.8 days.
///
/// RabbitMQ hold queues expire after twice their TTL, and this keeps both
/// numbers within a signed 32-bit millisecond count. Longer delays are
/// refused ([`Error::DelayTooLong`]), never clamped: clamping would release a
/// job early.
pub const MAX_DEFERRAL_MS: u64 = (1 << 31) - 1;

/// The longest wait worth asking a hold for: 24 days.
///
/// A whole number of days under [`MAX_DEFERRAL_MS`] (about 24.8 days), so
/// rounding it up to any granularity of up to 20 hours stays under the cap.
/// Backoffs are refused above it when they are built, and the worker's retry
/// and deferral layers never ask for longer, so a wait can never be refused
/// by the hold (which would leave the job to be delivered again at once).
/// [`fits_a_hold`] is the one test against it.
pub const LONGEST_WAIT: Duration = Duration::from_secs(24 * 24 * 60 * 60);

/// Whether one hold keeps a job for `delay`: at most [`LONGEST_WAIT`].
///
/// The one place the limit is applied. A backoff longer than this is
/// refused when it is built ([`Backoff::fixed`](crate::Backoff::fixed),
/// [`ExponentialBackoff::new`](crate::ExponentialBackoff::new)), and a
/// retry or deferral longer than this is dead-lettered rather than
/// shortened ([`Disposition::never_early`](super::Disposition::never_early)).
///
/// ```
/// use std::time::Duration;
/// use queuey_core::LONGEST_WAIT;
/// use queuey_core::backend::fits_a_hold;
///
/// assert!(fits_a_hold(LONGEST_WAIT));
/// assert!(!fits_a_hold(LONGEST_WAIT + Duration::from_nanos(1)));
/// ```
pub const fn fits_a_hold(delay: Duration) -> bool {
    delay.as_nanos() <= LONGEST_WAIT.as_nanos()
}

/// The granularity actually used: zero or sub-millisecond granularities are
/// raised to 1 ms, others rounded up to whole milliseconds.
pub fn effective_granularity_ms(granularity: Duration) -> u64 {
    ceil_ms(granularity).clamp(1, u128::from(u64::MAX)) as u64
}

/// A delay rounded **up** to a multiple of the granularity, in ms.
///
/// Rounding is never down, so a job is never released early. A zero delay
/// stays zero (the job needs no hold).
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
    let granularity = u128::from(effective_granularity_ms(granularity));
    let ms = ceil_ms(delay);
    ms.div_ceil(granularity) * granularity
}

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

fn ceil_ms(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
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
