//! Times in log lines, written as RFC 3339 in UTC
//! (`2024-05-01T12:00:00Z`) rather than as `SystemTime`'s debug form.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Displays a time as RFC 3339 in UTC, to the second, with milliseconds
/// when it has any: `2024-05-01T12:00:00Z`, `2024-05-01T12:00:00.250Z`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rfc3339(pub(crate) SystemTime);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Whole seconds since the epoch, and the milliseconds past them;
        // a time before the epoch counts down from it.
        let (seconds, millis) = match self.0.duration_since(UNIX_EPOCH) {
            Ok(since) => (
                i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
                since.subsec_millis(),
            ),
            Err(before) => {
                let before = before.duration();
                let whole = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
                match before.subsec_millis() {
                    0 => (-whole, 0),
                    ms => (-whole - 1, 1000 - ms),
                }
            }
        };
        let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            second_of_day / 3600,
            second_of_day / 60 % 60,
            second_of_day % 60
        )?;
        if millis > 0 {
            write!(f, ".{millis:03}")?;
        }
        f.write_str("Z")
    }
}

/// The proleptic Gregorian date `days` days after 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Counted from 0000-03-01, so that a leap day ends its year.
    let days = days.saturating_add(719_468);
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    // Both are in range: a day of 1..=31, a month of 1..=12.
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(seconds: u64) -> String {
        Rfc3339(UNIX_EPOCH + Duration::from_secs(seconds)).to_string()
    }

    #[test]
    fn the_epoch() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn a_time_of_day() {
        // 2024-05-01T12:34:56Z, as `date -u -d @1714566896` prints it.
        assert_eq!(at(1_714_566_896), "2024-05-01T12:34:56Z");
    }

    #[test]
    fn leap_days_and_year_ends() {
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_164_800), "2024-02-29T00:00:00Z");
        assert_eq!(at(1_735_689_599), "2024-12-31T23:59:59Z");
        assert_eq!(at(1_735_689_600), "2025-01-01T00:00:00Z");
        // 2100 is not a leap year: March follows February 28th.
        assert_eq!(at(4_107_456_000), "2100-02-28T00:00:00Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn milliseconds_when_there_are_some() {
        let time = UNIX_EPOCH + Duration::from_millis(1_714_566_896_250);
        assert_eq!(Rfc3339(time).to_string(), "2024-05-01T12:34:56.250Z");
    }

    #[test]
    fn before_the_epoch() {
        let time = UNIX_EPOCH - Duration::from_millis(1_500);
        assert_eq!(Rfc3339(time).to_string(), "1969-12-31T23:59:58.500Z");
    }
}
