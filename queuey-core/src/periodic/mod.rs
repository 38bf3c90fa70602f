//! Periodic jobs: schedules, and how a fleet agrees on who fires them.
//!
//! A [`Schedule`] says when ticks fall, the same in every process: a fixed
//! interval aligned to the Unix epoch ([`Schedule::every`]) or, with the
//! `cron` feature, a cron expression with seconds in an IANA time zone
//! ([`Schedule::cron`]). [`Leadership`] picks one process per schedule to
//! fire it and remembers the last tick, so each tick is enqueued once, with
//! the same id everywhere ([`tick_job_id`]). The scheduler itself is the
//! worker crate's `periodic` module.

#[cfg(feature = "cron")]
mod cron;
mod error;
mod leadership;
mod schedule;

use std::time::{SystemTime, UNIX_EPOCH};

use uuid::Uuid;

pub use error::InvalidSchedule;
pub use leadership::{Leadership, Lease};
pub use schedule::{Schedule, Ticks};

/// The UUID namespace of tick job ids.
const TICK_NAMESPACE: Uuid = Uuid::from_u128(0x6b1d_9a3e_52c4_4f0e_9d7a_1c3b_8e2f_4a61);

/// The id of the job a schedule named `name` enqueues for `tick`: a UUID
/// (version 5) of the name and the tick's instant in milliseconds since
/// the Unix epoch, the same in every process and on every run.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use queuey_core::periodic::tick_job_id;
///
/// let tick = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
/// assert_eq!(tick_job_id("nightly", tick), tick_job_id("nightly", tick));
/// assert_ne!(tick_job_id("nightly", tick), tick_job_id("hourly", tick));
/// assert_eq!(tick_job_id("nightly", tick).get_version_num(), 5);
/// ```
pub fn tick_job_id(name: &str, tick: SystemTime) -> Uuid {
    let ms = tick
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    Uuid::new_v5(&TICK_NAMESPACE, format!("{name}@{ms}").as_bytes())
}

/// Checks a schedule name: 1 to 120 characters of ASCII letters, digits,
/// `-`, `_` and `.`, so that it fits in a queue name.
pub fn check_name(name: &str) -> Result<(), InvalidSchedule> {
    let fits = !name.is_empty()
        && name.len() <= 120
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if fits {
        Ok(())
    } else {
        Err(InvalidSchedule::Name(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_fit_a_queue_name() {
        assert!(check_name("nightly-cleanup").is_ok());
        assert!(check_name("reports.weekly_v2").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("has space").is_err());
        assert!(check_name(&"x".repeat(121)).is_err());
    }

    #[test]
    fn tick_ids_differ_per_tick() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(10);
        let u = UNIX_EPOCH + std::time::Duration::from_secs(11);
        assert_ne!(tick_job_id("a", t), tick_job_id("a", u));
    }
}
