//! The wall clock that every `*_ms` time of queuey is read on.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, rounded down: the clock due times are
/// read on, so that a job is never taken for due early. A clock set before
/// the epoch reads 0.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
