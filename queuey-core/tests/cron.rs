//! Cron schedules across time zones and daylight saving changes: each tick
//! once, none skipped, none early.

use std::time::{Duration, SystemTime};

use jiff::civil::date;
use jiff::tz::TimeZone;
use queuey_core::periodic::{InvalidSchedule, Schedule};

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
