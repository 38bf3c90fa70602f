//! How long to wait before the next attempt.

use std::time::Duration;

use crate::wait::fits_a_hold;

/// How the wait before a retry grows with the attempt number.
///
/// Construct one with [`Backoff::none`], [`Backoff::fixed`] or
/// [`Backoff::exponential`]; the latter two validate their arguments and
/// return [`InvalidBackoff`] instead of panicking.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::Backoff;
///
/// let backoff = Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(60))?
///     .without_jitter();
/// assert_eq!(backoff.base_delay(1), Duration::from_secs(1));
/// assert_eq!(backoff.base_delay(3), Duration::from_secs(4));
/// assert_eq!(backoff.base_delay(30), Duration::from_secs(60));
/// # Ok::<(), queuey_core::InvalidBackoff>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Backoff {
    /// Retry at once (the retry still goes through the broker, behind the
    /// queue's backlog).
    None,
    /// The same wait before every retry.
    Fixed(Duration),
    /// A wait that grows geometrically, capped, optionally with full jitter.
    Exponential(ExponentialBackoff),
}

/// `min(max, base * factor^(attempt - 1))`, then, with jitter on, a uniform
/// draw from `[0, that]` ("full jitter").
#[derive(Debug, Clone, PartialEq)]
pub struct ExponentialBackoff {
    base: Duration,
    factor: f64,
    max: Duration,
    jitter: bool,
}

/// Why a backoff could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBackoff {
    /// A fixed or base delay of zero (use [`Backoff::None`] for no wait).
    #[error("the {0} delay must be greater than zero (use Backoff::None for no wait)")]
    ZeroDelay(&'static str),
    /// The growth factor is below 1, NaN or infinite.
    #[error("the backoff factor must be a finite number of at least 1, got {0}")]
    Factor(f64),
    /// A fixed delay or a cap longer than a hold accepts
    /// ([`LONGEST_WAIT`](crate::LONGEST_WAIT), 24 days).
    #[error(
        "the {which} delay ({delay:?}) is longer than the longest wait a hold accepts (24 days); \
         a job that must wait longer needs a scheduler, not a retry"
    )]
    TooLong {
        /// Which delay: `fixed` or `max`.
        which: &'static str,
        /// The delay given.
        delay: Duration,
    },
    /// The base delay is larger than the cap.
    #[error("the base delay ({base:?}) is larger than the maximum delay ({max:?})")]
    BaseAboveMax {
        /// The base delay given.
        base: Duration,
        /// The maximum delay given.
        max: Duration,
    },
}

impl Backoff {
    /// No wait between attempts.
    pub const fn none() -> Self {
        Backoff::None
    }

    /// The same wait before every retry; zero, and more than
    /// [`LONGEST_WAIT`](crate::LONGEST_WAIT), are refused.
    pub fn fixed(delay: Duration) -> Result<Self, InvalidBackoff> {
        if delay.is_zero() {
            return Err(InvalidBackoff::ZeroDelay("fixed"));
        }
        if !fits_a_hold(delay) {
            return Err(InvalidBackoff::TooLong {
                which: "fixed",
                delay,
            });
        }
        Ok(Backoff::Fixed(delay))
    }

    /// Exponential backoff with full jitter: see [`ExponentialBackoff`].
    pub fn exponential(base: Duration, factor: f64, max: Duration) -> Result<Self, InvalidBackoff> {
        ExponentialBackoff::new(base, factor, max).map(Backoff::Exponential)
    }

    /// The same backoff with jitter turned off (only exponential backoff
    /// has jitter).
    pub fn without_jitter(self) -> Self {
        match self {
            Backoff::Exponential(e) => Backoff::Exponential(e.with_jitter(false)),
            other => other,
        }
    }

    /// The wait after the given attempt (from 1; 0 counts as 1) failed,
    /// before any jitter.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        match self {
            Backoff::None => Duration::ZERO,
            Backoff::Fixed(d) => *d,
            Backoff::Exponential(e) => e.base_delay(attempt),
        }
    }

    /// The wait after the given attempt failed, with jitter drawn from the
    /// thread's random number generator.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.delay_with(attempt, fastrand::f64())
    }

    /// The wait after the given attempt failed, with `sample` (clamped to
    /// `[0, 1]`) as the jitter draw. Deterministic, for tests.
    pub fn delay_with(&self, attempt: u32, sample: f64) -> Duration {
        let base = self.base_delay(attempt);
        match self {
            Backoff::Exponential(e) if e.jitter => {
                let sample = if sample.is_nan() {
                    0.0
                } else {
                    sample.clamp(0.0, 1.0)
                };
                base.mul_f64(sample)
            }
            _ => base,
        }
    }

    /// The longest wait this backoff can produce.
    pub fn max_delay(&self) -> Duration {
        match self {
            Backoff::None => Duration::ZERO,
            Backoff::Fixed(d) => *d,
            Backoff::Exponential(e) => e.max,
        }
    }
}

impl Default for ExponentialBackoff {
    /// From 1 s, doubling, capped at 5 minutes, with full jitter.
    fn default() -> Self {
        ExponentialBackoff {
            base: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(300),
            jitter: true,
        }
    }
}

impl ExponentialBackoff {
    /// Validates and builds an exponential backoff, jitter on: `base`
    /// non-zero and at most `max`, `max` at most
    /// [`LONGEST_WAIT`](crate::LONGEST_WAIT), `factor` finite and at least 1.
    pub fn new(base: Duration, factor: f64, max: Duration) -> Result<Self, InvalidBackoff> {
        if base.is_zero() {
            return Err(InvalidBackoff::ZeroDelay("base"));
        }
        if !factor.is_finite() || factor < 1.0 {
            return Err(InvalidBackoff::Factor(factor));
        }
        if base > max {
            return Err(InvalidBackoff::BaseAboveMax { base, max });
        }
        if !fits_a_hold(max) {
            return Err(InvalidBackoff::TooLong {
                which: "max",
                delay: max,
            });
        }
        Ok(ExponentialBackoff {
            base,
            factor,
            max,
            jitter: true,
        })
    }

    /// Turns full jitter on or off.
    pub fn with_jitter(mut self, jitter: bool) -> Self {
        self.jitter = jitter;
        self
    }

    crate::getters! {
        /// The first delay.
        base: Duration;
        /// The growth factor.
        factor: f64;
        /// The cap.
        max: Duration;
        /// Whether full jitter is on.
        jitter: bool;
    }

    /// `min(max, base * factor^(attempt - 1))`, saturating at `max`.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.max(1) - 1;
        let exponent = i32::try_from(exponent).unwrap_or(i32::MAX);
        let scale = self.factor.powi(exponent);
        let secs = self.base.as_secs_f64() * scale;
        if !secs.is_finite() || secs >= self.max.as_secs_f64() {
            return self.max;
        }
        Duration::try_from_secs_f64(secs).map_or(self.max, |d| d.min(self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LONGEST_WAIT;
    use proptest::prelude::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn constructors_validate() {
        assert_eq!(
            Backoff::fixed(Duration::ZERO),
            Err(InvalidBackoff::ZeroDelay("fixed"))
        );
        assert_eq!(
            Backoff::exponential(Duration::ZERO, 2.0, S),
            Err(InvalidBackoff::ZeroDelay("base"))
        );
        assert!(matches!(
            Backoff::exponential(S, 0.5, S * 10),
            Err(InvalidBackoff::Factor(_))
        ));
        assert!(matches!(
            Backoff::exponential(S, f64::NAN, S * 10),
            Err(InvalidBackoff::Factor(_))
        ));
        assert!(matches!(
            Backoff::exponential(S, f64::INFINITY, S * 10),
            Err(InvalidBackoff::Factor(_))
        ));
        assert!(matches!(
            Backoff::exponential(S * 10, 2.0, S),
            Err(InvalidBackoff::BaseAboveMax { .. })
        ));
        assert!(Backoff::exponential(S, 1.0, S).is_ok());
        let month = Duration::from_secs(30 * 24 * 3600);
        assert!(matches!(
            Backoff::fixed(month),
            Err(InvalidBackoff::TooLong { which: "fixed", .. })
        ));
        assert!(matches!(
            Backoff::exponential(S, 2.0, month),
            Err(InvalidBackoff::TooLong { which: "max", .. })
        ));
        assert!(Backoff::fixed(LONGEST_WAIT).is_ok());
        assert!(Backoff::exponential(S, 2.0, LONGEST_WAIT).is_ok());
    }

    #[test]
    fn exponential_follows_the_formula() {
        let b = Backoff::exponential(Duration::from_millis(500), 2.0, S * 300)
            .unwrap()
            .without_jitter();
        let expected = [500, 1000, 2000, 4000, 8000];
        for (i, ms) in expected.iter().enumerate() {
            assert_eq!(b.base_delay(i as u32 + 1), Duration::from_millis(*ms));
            assert_eq!(b.delay(i as u32 + 1), Duration::from_millis(*ms));
        }
        assert_eq!(b.base_delay(0), Duration::from_millis(500));
        assert_eq!(b.base_delay(u32::MAX), S * 300);
    }

    #[test]
    fn fractional_factor() {
        let b = Backoff::exponential(S, 1.5, S * 100).unwrap();
        assert_eq!(b.base_delay(3), Duration::from_millis(2250));
    }

    #[test]
    fn fixed_and_none() {
        let f = Backoff::fixed(S * 3).unwrap();
        assert_eq!(f.delay(1), S * 3);
        assert_eq!(f.delay(9), S * 3);
        assert_eq!(Backoff::none().delay(4), Duration::ZERO);
    }

    #[test]
    fn jitter_sample_is_clamped() {
        let b = Backoff::exponential(S, 2.0, S * 10).unwrap();
        assert_eq!(b.delay_with(2, 0.5), S);
        assert_eq!(b.delay_with(2, 7.0), S * 2);
        assert_eq!(b.delay_with(2, -1.0), Duration::ZERO);
        assert_eq!(b.delay_with(2, f64::NAN), Duration::ZERO);
    }

    fn exponential() -> impl Strategy<Value = ExponentialBackoff> {
        (1u64..10_000, 1.0f64..10.0, 0u64..10_000_000).prop_map(|(base, factor, extra)| {
            ExponentialBackoff::new(
                Duration::from_millis(base),
                factor,
                Duration::from_millis(base + extra),
            )
            .unwrap()
        })
    }

    proptest! {
        #[test]
        fn monotone_up_to_max(e in exponential(), attempt in 1u32..200) {
            let a = e.base_delay(attempt);
            let b = e.base_delay(attempt + 1);
            prop_assert!(a <= b, "{a:?} > {b:?}");
        }

        #[test]
        fn never_above_max(e in exponential(), attempt in any::<u32>()) {
            prop_assert!(e.base_delay(attempt) <= e.max());
            prop_assert!(e.base_delay(attempt) >= e.base().min(e.max()));
        }

        #[test]
        fn jitter_within_zero_and_the_delay(e in exponential(), attempt in any::<u32>(), sample in any::<f64>()) {
            let b = Backoff::Exponential(e);
            let d = b.base_delay(attempt);
            let j = b.delay_with(attempt, sample);
            prop_assert!(j <= d, "{j:?} > {d:?}");
            let r = b.delay(attempt);
            prop_assert!(r <= d, "{r:?} > {d:?}");
        }
    }
}
