//! Never early, whatever happened in the hold queue.
//!
//! Every hold publish carries the job's due time (the `queuey-due-at`
//! header: milliseconds since the Unix epoch). A job can come back from its
//! hold before that time:
//!
//! - a policy set a shorter `message-ttl` on hold queues (RabbitMQ applies
//!   the smaller);
//! - the delay was longer than one hold queue keeps a job (about 24 days),
//!   so the hold was a first leg of several ("chained holds").
//!
//! And through a [job exchange](crate::RabbitMqOptions::job_exchange), a
//! producer sends a job for later straight to its work queue with its due
//! time, so every such job arrives early by design.
//!
//! Such a job is not run: the consumer holds it again for what remains
//! (the same due time), and only then acknowledges the delivery. One due
//! within [`WAIT_IN_PLACE`] (a quorum hold releases a job a millisecond
//! early now and then) waits for the rest where it is, then runs. A header
//! that is not a non-negative number counts as none (the job is due); a
//! job due more than [`FAR_FUTURE`] ahead is dead-lettered, saying so.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::AMQPValue;

use crate::properties::DUE_AT_HEADER;

/// The longest a job that arrived early waits where it is, before the
/// worker gets it, instead of being held again: the shortest hold queuey
/// publishes ([`SHORTEST_HOLD_MS`](crate::topology::SHORTEST_HOLD_MS)).
pub(crate) const WAIT_IN_PLACE: Duration = Duration::from_millis(crate::topology::SHORTEST_HOLD_MS);

/// How far ahead a due time may lie before it is taken for garbage: ten
/// years.
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// When a delivered job is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Due {
    /// Now (no header, a past due time, or a header that is not a time).
    Now,
    /// In a moment (at most [`WAIT_IN_PLACE`]): wait that long, then run.
    Soon(Duration),
    /// Later: hold it again for `remaining`, keeping `due_at_ms`.
    Later { remaining: Duration, due_at_ms: u64 },
    /// A due time too far ahead to be anything but garbage.
    Absurd(String),
}

/// When a job carrying `properties` is due; `now_ms` reads the clock, only
/// for a job that carries a due time (most carry none).
pub(crate) fn due(properties: &BasicProperties, now_ms: impl FnOnce() -> u64) -> Due {
    let Some(value) = properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(DUE_AT_HEADER))
    else {
        return Due::Now;
    };
    let due_at = match value {
        AMQPValue::LongLongInt(n) => *n,
        AMQPValue::LongInt(n) => i64::from(*n),
        AMQPValue::LongUInt(n) => i64::from(*n),
        AMQPValue::ShortInt(n) => i64::from(*n),
        AMQPValue::ShortUInt(n) => i64::from(*n),
        AMQPValue::Timestamp(n) => i64::try_from(*n).unwrap_or(i64::MAX),
        other => {
            tracing::warn!(header = DUE_AT_HEADER, value = ?other, "the due-time header is not a number; treating the job as due");
            return Due::Now;
        }
    };
    let Ok(due_at) = u64::try_from(due_at) else {
        tracing::warn!(
            header = DUE_AT_HEADER,
            due_at,
            "the due-time header is negative; treating the job as due"
        );
        return Due::Now;
    };
    let now_ms = now_ms();
    if due_at <= now_ms {
        return Due::Now;
    }
    let remaining = Duration::from_millis(due_at - now_ms);
    if remaining <= WAIT_IN_PLACE {
        return Due::Soon(remaining);
    }
    if remaining > FAR_FUTURE {
        return Due::Absurd(format!(
            "the job's due-time header ({DUE_AT_HEADER} = {due_at}) lies {} days ahead, beyond \
             any delay queuey parks a job for; refusing to hold it that long",
            remaining.as_secs() / 86_400
        ));
    }
    Due::Later {
        remaining,
        due_at_ms: due_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldTable, LongString};

    fn with(value: AMQPValue) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert(DUE_AT_HEADER.into(), value);
        BasicProperties::default().with_headers(headers)
    }

    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn a_future_due_time_is_held_again_for_the_rest() {
        let p = with(AMQPValue::LongLongInt(NOW as i64 + 4_000));
        assert_eq!(
            due(&p, || NOW),
            Due::Later {
                remaining: Duration::from_secs(4),
                due_at_ms: NOW + 4_000
            }
        );
        let p = with(AMQPValue::Timestamp(NOW + 1_000));
        assert!(matches!(due(&p, || NOW), Due::Later { .. }));
    }

    #[test]
    fn a_job_a_moment_early_waits_for_the_rest_where_it_is() {
        let p = with(AMQPValue::LongLongInt(NOW as i64 + 1));
        assert_eq!(due(&p, || NOW), Due::Soon(Duration::from_millis(1)));
        let p = with(AMQPValue::LongLongInt(NOW as i64 + 50));
        assert_eq!(due(&p, || NOW), Due::Soon(WAIT_IN_PLACE));
        let p = with(AMQPValue::LongLongInt(NOW as i64 + 51));
        assert!(matches!(due(&p, || NOW), Due::Later { .. }));
    }

    #[test]
    fn past_missing_and_malformed_due_times_are_due_now() {
        assert_eq!(due(&BasicProperties::default(), || NOW), Due::Now);
        for value in [
            AMQPValue::LongLongInt(NOW as i64),
            AMQPValue::LongLongInt(1),
            AMQPValue::LongLongInt(-5),
            AMQPValue::LongLongInt(i64::MIN),
            AMQPValue::LongString(LongString::from("tomorrow")),
            AMQPValue::Double(1e18),
            AMQPValue::Boolean(true),
        ] {
            assert_eq!(due(&with(value.clone()), || NOW), Due::Now, "{value:?}");
        }
    }

    #[test]
    fn the_clock_is_read_only_for_a_job_with_a_due_time() {
        let unread = || -> u64 { panic!("the clock was read for a job without a due time") };
        assert_eq!(due(&BasicProperties::default(), unread), Due::Now);
        let mut other = FieldTable::default();
        other.insert("x-death".into(), AMQPValue::LongLongInt(1));
        assert_eq!(
            due(&BasicProperties::default().with_headers(other), unread),
            Due::Now
        );
    }

    #[test]
    fn a_due_time_years_ahead_is_refused() {
        let p = with(AMQPValue::LongLongInt(i64::MAX));
        let Due::Absurd(reason) = due(&p, || NOW) else {
            panic!("not refused")
        };
        assert!(reason.contains(DUE_AT_HEADER), "{reason}");
        let nine_years = NOW + 9 * 365 * 86_400_000;
        assert!(matches!(
            due(&with(AMQPValue::LongLongInt(nine_years as i64)), || NOW),
            Due::Later { .. }
        ));
    }
}
