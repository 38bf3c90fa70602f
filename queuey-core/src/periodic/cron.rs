//! Cron expressions in a time zone, through croner and jiff.

use std::fmt;
use std::time::SystemTime;

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::InvalidSchedule;

/// A parsed cron expression and its zone.
#[derive(Clone)]
pub(super) struct CronSchedule {
    expression: String,
    zone_name: String,
    cron: Cron,
    zone: TimeZone,
}

impl CronSchedule {
    pub(super) fn new(expression: &str, zone: &str) -> Result<Self, InvalidSchedule> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(expression)
            .map_err(|e| InvalidSchedule::Cron {
                expression: expression.to_owned(),
                reason: e.to_string(),
            })?;
        let tz = TimeZone::get(zone).map_err(|_| InvalidSchedule::Zone {
            zone: zone.to_owned(),
        })?;
        let schedule = CronSchedule {
            expression: expression.to_owned(),
            zone_name: zone.to_owned(),
            cron,
            zone: tz,
        };
        // Every real calendar pattern recurs within a few years (leap days
        // every four, a weekday on a date every 28): none after now means
        // none ever.
        if schedule.next_after(SystemTime::now()).is_none() {
            return Err(InvalidSchedule::NeverFires {
                expression: expression.to_owned(),
            });
        }
        Ok(schedule)
    }

    /// Ticks fall on whole seconds, so searching from the whole second of
    /// `after`, exclusive, finds the first tick strictly after it.
    pub(super) fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        let at = Timestamp::try_from(after).ok()?;
        let second = Timestamp::from_second(at.as_second()).ok()?;
        let zoned = second.to_zoned(self.zone.clone());
        let next = self.cron.find_next_occurrence(&zoned, false).ok()?;
        Some(SystemTime::from(next.timestamp()))
    }

    /// Inclusive search backwards from the whole second of `at`.
    pub(super) fn latest_at_or_before(&self, at: SystemTime) -> Option<SystemTime> {
        let at = Timestamp::try_from(at).ok()?;
        let second = Timestamp::from_second(at.as_second()).ok()?;
        let zoned = second.to_zoned(self.zone.clone());
        let previous = self.cron.find_previous_occurrence(&zoned, true).ok()?;
        Some(SystemTime::from(previous.timestamp()))
    }
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression && self.zone_name == other.zone_name
    }
}

impl Eq for CronSchedule {}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cron \"{}\" in {}", self.expression, self.zone_name)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jiff::civil::date;

    use super::super::Schedule;
    use super::*;

    const AMSTERDAM: &str = "Europe/Amsterdam";

    fn tz() -> TimeZone {
        TimeZone::get(AMSTERDAM).unwrap()
    }

    /// A wall-clock time in Amsterdam (the earlier one when it happens twice).
    fn local(y: i16, m: i8, d: i8, hh: i8, mm: i8) -> SystemTime {
        let zoned = tz()
            .to_ambiguous_zoned(date(y, m, d).at(hh, mm, 0, 0))
            .earlier()
            .unwrap();
        SystemTime::from(zoned.timestamp())
    }

    /// A UTC instant.
    fn utc(y: i16, m: i8, d: i8, hh: i8, mm: i8) -> SystemTime {
        let zoned = date(y, m, d)
            .at(hh, mm, 0, 0)
            .to_zoned(TimeZone::UTC)
            .unwrap();
        SystemTime::from(zoned.timestamp())
    }

    fn ticks(s: &Schedule, from: SystemTime, to: SystemTime) -> Vec<SystemTime> {
        s.ticks_between(from, to).collect()
    }

    // 2026: spring forward on Sunday 29 March at 02:00 CET (01:00 UTC) to
    // 03:00 CEST; fall back on Sunday 25 October at 03:00 CEST (01:00 UTC)
    // to 02:00 CET.

    #[test]
    fn an_expression_that_never_fires_is_refused() {
        assert_eq!(
            Schedule::cron("0 0 0 31 2 *", "UTC"),
            Err(InvalidSchedule::NeverFires {
                expression: "0 0 0 31 2 *".into()
            })
        );
        assert!(
            Schedule::cron("0 0 0 29 2 *", "UTC").is_ok(),
            "leap days come"
        );
    }

    #[test]
    fn a_fixed_time_in_the_spring_gap_fires_once_right_after_it() {
        let s = Schedule::cron("0 30 2 * * *", AMSTERDAM).unwrap();
        let got = ticks(&s, utc(2026, 3, 27, 12, 0), utc(2026, 3, 31, 12, 0));
        assert_eq!(
            got,
            vec![
                utc(2026, 3, 28, 1, 30), // 02:30 CET
                utc(2026, 3, 29, 1, 0),  // 02:30 does not exist: 03:00 CEST
                utc(2026, 3, 30, 0, 30), // 02:30 CEST
                utc(2026, 3, 31, 0, 30),
            ]
        );
    }

    #[test]
    fn a_fixed_time_repeated_in_the_fall_fires_once() {
        let s = Schedule::cron("0 30 2 * * *", AMSTERDAM).unwrap();
        let got = ticks(&s, utc(2026, 10, 24, 12, 0), utc(2026, 10, 26, 12, 0));
        assert_eq!(
            got,
            vec![
                utc(2026, 10, 25, 0, 30), // 02:30 CEST, the first of two
                utc(2026, 10, 26, 1, 30), // 02:30 CET
            ]
        );
    }

    #[test]
    fn hourly_ticks_follow_real_hours_through_spring_forward() {
        let s = Schedule::cron("0 0 * * * *", AMSTERDAM).unwrap();
        // 00:00 CET to 05:00 CEST is four real hours.
        let got = ticks(&s, local(2026, 3, 29, 0, 0), local(2026, 3, 29, 5, 0));
        assert_eq!(
            got,
            vec![
                utc(2026, 3, 29, 0, 0), // 01:00 CET
                utc(2026, 3, 29, 1, 0), // 03:00 CEST (02:00 never happens)
                utc(2026, 3, 29, 2, 0), // 04:00 CEST
                utc(2026, 3, 29, 3, 0), // 05:00 CEST
            ]
        );
    }

    #[test]
    fn hourly_ticks_follow_real_hours_through_fall_back() {
        let s = Schedule::cron("0 0 * * * *", AMSTERDAM).unwrap();
        // 00:00 CEST to 04:00 CET is five real hours; 02:00 happens twice.
        let got = ticks(&s, utc(2026, 10, 24, 22, 0), utc(2026, 10, 25, 3, 0));
        assert_eq!(
            got,
            vec![
                utc(2026, 10, 24, 23, 0), // 01:00 CEST
                utc(2026, 10, 25, 0, 0),  // 02:00 CEST
                utc(2026, 10, 25, 1, 0),  // 02:00 CET
                utc(2026, 10, 25, 2, 0),  // 03:00 CET
                utc(2026, 10, 25, 3, 0),  // 04:00 CET
            ]
        );
        // No tick twice, none out of order.
        assert!(got.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_fixed_hour_repeated_in_the_fall_fires_once() {
        let s = Schedule::cron("0 0 2 * * *", AMSTERDAM).unwrap();
        let got = ticks(&s, utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 12, 0));
        assert_eq!(got, vec![utc(2026, 10, 25, 0, 0)]);
    }

    #[test]
    fn seconds_are_the_first_of_six_fields_and_optional() {
        let six = Schedule::cron("*/15 * * * * *", "UTC").unwrap();
        let base = utc(2026, 1, 1, 0, 0);
        assert_eq!(ticks(&six, base, base + Duration::from_secs(60)).len(), 4);
        let five = Schedule::cron("*/5 * * * *", "UTC").unwrap();
        assert_eq!(five.next_after(base), Some(base + Duration::from_secs(300)));
    }

    #[test]
    fn next_after_is_strict_and_ignores_sub_seconds() {
        let s = Schedule::cron("* * * * * *", "UTC").unwrap();
        let base = utc(2026, 1, 1, 0, 0);
        assert_eq!(s.next_after(base), Some(base + Duration::from_secs(1)));
        assert_eq!(
            s.next_after(base + Duration::from_millis(999)),
            Some(base + Duration::from_secs(1))
        );
        assert_eq!(s.next_after(base - Duration::from_millis(1)), Some(base));
    }

    #[test]
    fn the_latest_tick_agrees_with_the_next_one() {
        let s = Schedule::cron("0 30 2 * * *", AMSTERDAM).unwrap();
        // Inside the spring gap's day, after its tick.
        assert_eq!(
            s.latest_at_or_before(utc(2026, 3, 29, 12, 0)),
            Some(utc(2026, 3, 29, 1, 0))
        );
        assert_eq!(
            s.latest_at_or_before(utc(2026, 10, 25, 12, 0)),
            Some(utc(2026, 10, 25, 0, 30))
        );
        let hourly = Schedule::cron("0 0 * * * *", AMSTERDAM).unwrap();
        assert_eq!(
            hourly.latest_at_or_before(utc(2026, 10, 25, 1, 30)),
            Some(utc(2026, 10, 25, 1, 0))
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(
            Schedule::cron("not cron", "UTC"),
            Err(InvalidSchedule::Cron { .. })
        ));
        assert!(matches!(
            Schedule::cron("0 0 3 * * *", "Nowhere/Land"),
            Err(InvalidSchedule::Zone { .. })
        ));
        let s = Schedule::cron("0 0 3 * * *", AMSTERDAM).unwrap();
        assert_eq!(s.to_string(), "cron \"0 0 3 * * *\" in Europe/Amsterdam");
    }
}
