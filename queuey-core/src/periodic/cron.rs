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
