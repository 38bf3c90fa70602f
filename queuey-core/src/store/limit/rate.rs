//! A rate of starts: how many per period, with what burst.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The longest period a [`Rate`] takes: 365 days.
const MAX_PERIOD: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The shortest interval between starts a [`Rate`] takes: one microsecond
/// (a million starts per second), the precision stores keep time in.
const MIN_INTERVAL: Duration = Duration::from_micros(1);

/// The forms [`Rate::from_str`] accepts, for its error messages.
const FORMS: &str = "a count, '/', then a period: a unit (ms, s, m, h, d) or a number and a unit, \
                     optionally followed by ' burst N' (for example \"10/s\", \"600/m\", \"3/h\", \
                     \"5/1500ms\", \"1/30s\", \"100/m burst 20\")";

/// A rate: at most `count` starts per `per`, with bursts of up to `burst`
/// at once (`burst` >= 1, 1 unless set).
///
/// Turns are given by the generic cell rate algorithm (GCRA): starts are
/// spaced by the emission [interval](Rate::interval) `T = per / count`,
/// and a key idle for a while may start up to `burst` at once (a tolerance
/// of `(burst - 1) * T`). Over any span of time `t`, at most
/// `burst + t / T` start.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::store::Rate;
///
/// let rate: Rate = "600/m".parse()?;
/// assert_eq!(rate.interval(), Duration::from_millis(100));
/// let rate = Rate::new(5, Duration::from_millis(1500))?.with_burst(3)?;
/// assert_eq!(rate.interval(), Duration::from_millis(300));
/// assert_eq!(rate.to_string(), "5/1500ms burst 3");
/// assert_eq!("5/1500ms burst 3".parse::<Rate>()?, rate);
/// # Ok::<(), queuey_core::store::RateError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    count: u32,
    per: Duration,
    burst: u32,
}

/// A rate queuey refuses, from [`Rate::new`], [`Rate::with_burst`] or
/// parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RateError {
    /// A count of zero: nothing would ever start.
    #[error(
        "a rate of zero starts lets nothing start: give a count of at least 1 (for example \"10/s\")"
    )]
    ZeroCount,
    /// A period of zero.
    #[error(
        "a rate over a period of zero means nothing: give a period of at least 1 ms (for example \"10/s\")"
    )]
    ZeroPeriod,
    /// A burst of zero: nothing would ever start.
    #[error(
        "a burst of zero lets nothing start: give a burst of at least 1 (1 spaces every start evenly)"
    )]
    ZeroBurst,
    /// More than a million starts per second: starts closer than a
    /// microsecond apart.
    #[error(
        "a rate of {count} per {per:?} spaces starts by less than a microsecond: give at most \
         a million per second, or no rate at all"
    )]
    TooFast {
        /// The count given.
        count: u32,
        /// The period given.
        per: Duration,
    },
    /// A period longer than 365 days.
    #[error(
        "a rate over {per:?} is longer than the maximum period of 365 days: give a shorter one"
    )]
    PeriodTooLong {
        /// The period given.
        per: Duration,
    },
    /// Text that is not a rate.
    #[error("{text:?} is not a rate ({reason}): give {FORMS}")]
    Unparsable {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl Rate {
    /// At most `count` starts per `per`, each spaced by `per / count`
    /// (a burst of 1).
    pub fn new(count: u32, per: Duration) -> Result<Rate, RateError> {
        if count == 0 {
            return Err(RateError::ZeroCount);
        }
        if per.is_zero() {
            return Err(RateError::ZeroPeriod);
        }
        if per > MAX_PERIOD {
            return Err(RateError::PeriodTooLong { per });
        }
        if per / count < MIN_INTERVAL {
            return Err(RateError::TooFast { count, per });
        }
        Ok(Rate {
            count,
            per,
            burst: 1,
        })
    }

    /// The same rate, letting up to `burst` start at once after the key
    /// was idle.
    pub fn with_burst(self, burst: u32) -> Result<Rate, RateError> {
        if burst == 0 {
            return Err(RateError::ZeroBurst);
        }
        Ok(Rate { burst, ..self })
    }

    /// How many start per period.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// How many may start at once after the key was idle.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The emission interval `per / count`: how far apart starts are once
    /// the burst is spent.
    pub fn interval(&self) -> Duration {
        self.per / self.count
    }

    /// How far ahead of its even spacing a start may come:
    /// `(burst - 1) * interval`.
    pub fn tolerance(&self) -> Duration {
        // At most 2^32 intervals of at most a year: well inside a Duration.
        self.interval()
            .checked_mul(self.burst - 1)
            .unwrap_or(Duration::MAX)
    }
}

impl fmt::Display for Rate {
    /// The form [`Rate::from_str`] reads back: `10/s`, `5/1500ms`,
    /// `100/m burst 20`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.count)?;
        let nanos = self.per.as_nanos();
        let (name, size) = UNITS
            .iter()
            .rev()
            .find(|(_, size)| nanos.is_multiple_of(size.as_nanos()))
            .copied()
            .unwrap_or(UNITS[0]);
        let amount = nanos / size.as_nanos();
        if amount != 1 {
            write!(f, "{amount}")?;
        }
        f.write_str(name)?;
        if self.burst != 1 {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

/// The units of a period, smallest first.
const UNITS: [(&str, Duration); 7] = [
    ("ns", Duration::from_nanos(1)),
    ("us", Duration::from_micros(1)),
    ("ms", Duration::from_millis(1)),
    ("s", Duration::from_secs(1)),
    ("m", Duration::from_secs(60)),
    ("h", Duration::from_secs(60 * 60)),
    ("d", Duration::from_secs(24 * 60 * 60)),
];

impl FromStr for Rate {
    type Err = RateError;

    /// Reads `count/period`, the period a unit (`ms`, `s`, `m`, `h`, `d`;
    /// also `us` and `ns`) or a number and a unit, then optionally
    /// ` burst N`: `10/s`, `600/m`, `3/h`, `5/1500ms`, `1/30s`,
    /// `100/m burst 20`.
    fn from_str(text: &str) -> Result<Rate, RateError> {
        let unparsable = |reason| RateError::Unparsable {
            text: text.to_owned(),
            reason,
        };
        let (rate, burst) = match text.trim().split_once(" burst ") {
            Some((rate, burst)) => (rate.trim_end(), Some(burst.trim())),
            None => (text.trim(), None),
        };
        let (count, period) = rate
            .split_once('/')
            .ok_or_else(|| unparsable("no '/' between the count and the period"))?;
        let count: u32 =
            number(count.trim()).ok_or_else(|| unparsable("the count is not a whole number"))?;
        let period = period.trim();
        let digits = period
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| unparsable("the period has no unit (ms, s, m, h or d)"))?;
        let (amount, unit) = period.split_at(digits);
        let amount: u32 = if amount.is_empty() {
            1
        } else {
            number(amount).ok_or_else(|| unparsable("the period's number is too large"))?
        };
        let size = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, size)| *size)
            .ok_or_else(|| unparsable("the period's unit is not one of ms, s, m, h, d"))?;
        let per = size
            .checked_mul(amount)
            .ok_or_else(|| unparsable("the period is too long"))?;
        let rate = Rate::new(count, per)?;
        match burst {
            None => Ok(rate),
            Some(burst) => rate.with_burst(
                number(burst).ok_or_else(|| unparsable("the burst is not a whole number"))?,
            ),
        }
    }
}

/// A whole number of ASCII digits only (no sign, no spaces).
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(text: &str) -> Rate {
        text.parse().unwrap()
    }

    #[test]
    fn the_documented_forms_parse() {
        assert_eq!(rate("10/s"), Rate::new(10, Duration::from_secs(1)).unwrap());
        assert_eq!(rate("600/m").interval(), Duration::from_millis(100));
        assert_eq!(rate("3/h").per(), Duration::from_secs(3600));
        assert_eq!(rate("5/1500ms").interval(), Duration::from_millis(300));
        assert_eq!(rate("1/30s").interval(), Duration::from_secs(30));
        assert_eq!(rate("2/d").per(), Duration::from_secs(86_400));
        assert_eq!(rate(" 100/m burst 20 ").burst(), 20);
        assert_eq!(rate("10/s").burst(), 1);
    }

    #[test]
    fn display_reads_back() {
        for text in [
            "10/s",
            "600/m",
            "3/h",
            "5/1500ms",
            "1/30s",
            "7/90m burst 4",
            "1/1500us",
        ] {
            assert_eq!(rate(text).to_string(), text);
            assert_eq!(rate(&rate(text).to_string()), rate(text));
        }
        assert_eq!(rate("1/60s").to_string(), "1/m");
    }

    #[test]
    fn zeros_and_nonsense_are_refused_with_what_to_give() {
        assert_eq!("0/s".parse::<Rate>(), Err(RateError::ZeroCount));
        assert_eq!("1/0s".parse::<Rate>(), Err(RateError::ZeroPeriod));
        assert_eq!("1/s burst 0".parse::<Rate>(), Err(RateError::ZeroBurst));
        assert_eq!(
            Rate::new(1, Duration::from_secs(1)).unwrap().with_burst(0),
            Err(RateError::ZeroBurst)
        );
        assert!(matches!(
            Rate::new(u32::MAX, Duration::from_millis(1)),
            Err(RateError::TooFast { .. })
        ));
        assert!(matches!(
            "1/366d".parse::<Rate>(),
            Err(RateError::PeriodTooLong { .. })
        ));
        for text in [
            "",
            "10",
            "10/",
            "ten/s",
            "-1/s",
            "10/5",
            "10/sec",
            "10/s burst x",
            "1/99999999999h",
        ] {
            let error = text.parse::<Rate>().unwrap_err();
            assert!(
                matches!(error, RateError::Unparsable { .. }),
                "{text}: {error:?}"
            );
            assert!(error.to_string().contains("\"600/m\""), "{error}");
        }
        assert!(RateError::ZeroCount.to_string().contains("at least 1"));
    }

    #[test]
    fn the_tolerance_is_burst_minus_one_intervals() {
        let rate = rate("10/s burst 5");
        assert_eq!(rate.tolerance(), Duration::from_millis(400));
        assert_eq!(
            Rate::new(1, Duration::from_secs(1)).unwrap().tolerance(),
            Duration::ZERO
        );
    }
}
