//! When a periodic job's ticks fall.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::InvalidSchedule;

/// When a periodic job fires: a fixed interval, or a cron expression in a
/// time zone.
///
/// Every process computes the same ticks from the same schedule: an
/// interval is aligned to the Unix epoch (`every(1 h)` ticks on the hour,
/// UTC), and a cron expression names wall-clock times in its zone.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use queuey_core::periodic::Schedule;
///
/// let every = Schedule::every(Duration::from_secs(60))?;
/// let at = UNIX_EPOCH + Duration::from_secs(90);
/// assert_eq!(every.next_after(at), Some(UNIX_EPOCH + Duration::from_secs(120)));
/// // Strictly after: a tick is never its own successor.
/// assert_eq!(
///     every.next_after(UNIX_EPOCH + Duration::from_secs(120)),
///     Some(UNIX_EPOCH + Duration::from_secs(180)),
/// );
/// let ticks: Vec<_> = every.ticks_between(UNIX_EPOCH, UNIX_EPOCH + Duration::from_secs(180)).collect();
/// assert_eq!(ticks.len(), 3);
/// # Ok::<(), queuey_core::periodic::InvalidSchedule>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Schedule {
    kind: Kind,
}

#[derive(Clone, PartialEq, Eq)]
enum Kind {
    Every {
        period_ms: u64,
    },
    #[cfg(feature = "cron")]
    Cron(std::sync::Arc<super::cron::CronSchedule>),
}

impl Schedule {
    /// A tick every `period`, at whole multiples of it since the Unix epoch
    /// (so `every(Duration::from_secs(3600))` ticks on the hour, UTC). The
    /// period counts in whole milliseconds and must be at least 1 ms.
    pub fn every(period: Duration) -> Result<Self, InvalidSchedule> {
        let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX);
        if period_ms == 0 {
            return Err(InvalidSchedule::Interval(period));
        }
        Ok(Schedule {
            kind: Kind::Every { period_ms },
        })
    }

    /// A tick at every wall-clock time that the cron `expression` names in
    /// the IANA time `zone` (`"Europe/Amsterdam"`, `"UTC"`).
    ///
    /// The expression has six fields, seconds first
    /// (`sec min hour day-of-month month day-of-week`), or the usual five
    /// (seconds are then 0); names (`MON`, `JAN`), ranges, lists, steps,
    /// `L`, `W` and `#` work as in Vixie cron and its descendants.
    ///
    /// Daylight-saving transitions follow the zone:
    ///
    /// - a time the clock skips (02:30 on a spring-forward night) fires once,
    ///   at the first real instant after the gap (03:00);
    /// - a time the clock repeats (02:30 on a fall-back night) fires once,
    ///   at its first occurrence, when the expression names a fixed time;
    ///   an expression that repeats within the hour (`0 0 * * * *`,
    ///   `0 */15 * * * *`) fires in both, since both are real hours.
    ///
    /// ```
    /// use queuey_core::periodic::Schedule;
    ///
    /// let nightly = Schedule::cron("0 0 3 * * *", "Europe/Amsterdam")?;
    /// assert!(Schedule::cron("0 0 25 * * *", "UTC").is_err());
    /// assert!(Schedule::cron("0 0 3 * * *", "Mars/Olympus").is_err());
    /// # let _ = nightly;
    /// # Ok::<(), queuey_core::periodic::InvalidSchedule>(())
    /// ```
    #[cfg(feature = "cron")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cron")))]
    pub fn cron(expression: &str, zone: &str) -> Result<Self, InvalidSchedule> {
        Ok(Schedule {
            kind: Kind::Cron(std::sync::Arc::new(super::cron::CronSchedule::new(
                expression, zone,
            )?)),
        })
    }

    /// The first tick strictly after `after`; `None` when there is none (an
    /// instant before the Unix epoch, or a cron expression that never
    /// matches again).
    pub fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        match &self.kind {
            Kind::Every { period_ms } => {
                let ms = after.duration_since(UNIX_EPOCH).ok()?;
                let ms = u64::try_from(ms.as_millis()).ok()?;
                let next = (ms / period_ms).checked_add(1)?.checked_mul(*period_ms)?;
                Some(UNIX_EPOCH + Duration::from_millis(next))
            }
            #[cfg(feature = "cron")]
            Kind::Cron(cron) => cron.next_after(after),
        }
    }

    /// The latest tick at or before `at`; `None` when there is none.
    pub fn latest_at_or_before(&self, at: SystemTime) -> Option<SystemTime> {
        match &self.kind {
            Kind::Every { period_ms } => {
                let ms = at.duration_since(UNIX_EPOCH).ok()?;
                let ms = u64::try_from(ms.as_millis()).ok()?;
                Some(UNIX_EPOCH + Duration::from_millis(ms / period_ms * period_ms))
            }
            #[cfg(feature = "cron")]
            Kind::Cron(cron) => cron.latest_at_or_before(at),
        }
    }

    /// The ticks in `(after, until]`, oldest first.
    pub fn ticks_between(&self, after: SystemTime, until: SystemTime) -> Ticks<'_> {
        Ticks {
            schedule: self,
            cursor: after,
            until,
        }
    }

    /// The interval, for an interval schedule.
    pub fn period(&self) -> Option<Duration> {
        match &self.kind {
            Kind::Every { period_ms } => Some(Duration::from_millis(*period_ms)),
            #[cfg(feature = "cron")]
            Kind::Cron(_) => None,
        }
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({self})")
    }
}

impl fmt::Display for Schedule {
    /// `every 1s`, or `cron "0 0 3 * * *" in Europe/Amsterdam`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Every { period_ms } => {
                write!(f, "every {:?}", Duration::from_millis(*period_ms))
            }
            #[cfg(feature = "cron")]
            Kind::Cron(cron) => fmt::Display::fmt(cron, f),
        }
    }
}

/// The ticks of a schedule between two instants; see
/// [`Schedule::ticks_between`].
#[derive(Debug, Clone)]
pub struct Ticks<'a> {
    schedule: &'a Schedule,
    cursor: SystemTime,
    until: SystemTime,
}

impl Iterator for Ticks<'_> {
    type Item = SystemTime;

    fn next(&mut self) -> Option<SystemTime> {
        let next = self.schedule.next_after(self.cursor)?;
        if next > self.until {
            return None;
        }
        self.cursor = next;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn intervals_align_to_the_epoch() {
        let s = Schedule::every(Duration::from_millis(1500)).unwrap();
        assert_eq!(s.next_after(at(0)), Some(at(1500)));
        assert_eq!(s.next_after(at(1499)), Some(at(1500)));
        assert_eq!(s.next_after(at(1500)), Some(at(3000)));
        assert_eq!(s.next_after(at(1501)), Some(at(3000)));
        // Sub-millisecond parts do not shift a tick.
        assert_eq!(
            s.next_after(at(1500) + Duration::from_micros(999)),
            Some(at(3000))
        );
    }

    #[test]
    fn ticks_between_is_open_then_closed() {
        let s = Schedule::every(Duration::from_secs(1)).unwrap();
        let ticks: Vec<_> = s.ticks_between(at(1000), at(4000)).collect();
        assert_eq!(ticks, vec![at(2000), at(3000), at(4000)]);
        assert_eq!(s.ticks_between(at(4000), at(4999)).count(), 0);
        assert_eq!(s.ticks_between(at(5000), at(4000)).count(), 0);
    }

    #[test]
    fn the_latest_tick_at_or_before() {
        let s = Schedule::every(Duration::from_secs(1)).unwrap();
        assert_eq!(s.latest_at_or_before(at(2000)), Some(at(2000)));
        assert_eq!(s.latest_at_or_before(at(2999)), Some(at(2000)));
        assert_eq!(s.latest_at_or_before(at(999)), Some(at(0)));
    }

    #[test]
    fn a_zero_interval_is_refused() {
        assert_eq!(
            Schedule::every(Duration::from_micros(999)),
            Err(InvalidSchedule::Interval(Duration::from_micros(999)))
        );
    }

    #[test]
    fn before_the_epoch_there_is_no_tick() {
        let s = Schedule::every(Duration::from_secs(1)).unwrap();
        assert_eq!(s.next_after(UNIX_EPOCH - Duration::from_secs(5)), None);
    }

    #[test]
    fn every_process_computes_the_same_ticks() {
        let a = Schedule::every(Duration::from_secs(7)).unwrap();
        let b = Schedule::every(Duration::from_secs(7)).unwrap();
        let now = SystemTime::now();
        assert_eq!(a.next_after(now), b.next_after(now));
        assert_eq!(a.to_string(), "every 7s");
    }
}
