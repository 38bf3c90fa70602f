//! The guard's decisions as pure functions: reading the count a delivery
//! carries, and what to do with a delivery that came back unsettled.

use lapin::BasicProperties;
use lapin::types::AMQPValue;

use crate::topology::UNSETTLED_DELIVERIES_HEADER;

/// The count a delivery carries in [`UNSETTLED_DELIVERIES_HEADER`]: 0 when
/// the header is absent, `Err` (with what was found) when it is not a
/// non-negative integer. Counts past `u32::MAX` saturate.
pub(crate) fn recorded(properties: &BasicProperties) -> Result<u32, String> {
    let Some(value) = properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(UNSETTLED_DELIVERIES_HEADER))
    else {
        return Ok(0);
    };
    let n: i128 = match value {
        AMQPValue::LongLongInt(n) => i128::from(*n),
        AMQPValue::LongInt(n) => i128::from(*n),
        AMQPValue::LongUInt(n) => i128::from(*n),
        AMQPValue::ShortInt(n) => i128::from(*n),
        AMQPValue::ShortUInt(n) => i128::from(*n),
        AMQPValue::ShortShortInt(n) => i128::from(*n),
        AMQPValue::ShortShortUInt(n) => i128::from(*n),
        other => return Err(format!("{other:?}")),
    };
    if n < 0 {
        return Err(n.to_string());
    }
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

/// What becomes of a delivery that came back without being settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A first return: back into the work queue, carrying `count` (1). A
    /// broker restart or a lost connection returns every job it touched,
    /// nearly all of them innocent: they go on at full speed.
    Again { count: u32 },
    /// A later return: into the suspect queue, carrying `count`, to run
    /// alone.
    Suspect { count: u32 },
    /// Into the dead-letter queue, carrying `count`, for `reason`.
    DeadLetter { count: u32, reason: String },
}

/// The verdict on a delivery that came back unsettled `recorded` times
/// before, this return making one more: dead-lettered once the count
/// reaches `limit`; below it, a first return goes back to the work queue
/// and a later one to the suspect queue.
pub(crate) fn verdict(recorded: u32, limit: u32) -> Verdict {
    let count = recorded.saturating_add(1);
    if count >= limit {
        Verdict::DeadLetter {
            count,
            reason: reason(count),
        }
    } else if count == 1 {
        Verdict::Again { count }
    } else {
        Verdict::Suspect { count }
    }
}

/// Whether a delivery with `properties` came back unsettled before (its
/// count is above 0, or unreadable): the job may have started already.
pub(crate) fn returned_before(properties: &BasicProperties) -> bool {
    recorded(properties).map_or(true, |n| n > 0)
}

/// The dead-letter reason of a job the guard gave up on.
pub(crate) fn reason(count: u32) -> String {
    format!(
        "delivered {count} times without being settled: the worker died or lost its \
         connection while handling it (or could not settle it)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldTable, LongString};

    fn with(value: AMQPValue) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert(UNSETTLED_DELIVERIES_HEADER.into(), value);
        BasicProperties::default().with_headers(headers)
    }

    #[test]
    fn an_absent_header_is_zero() {
        assert_eq!(recorded(&BasicProperties::default()), Ok(0));
        let mut other = FieldTable::default();
        other.insert("queuey-due-at".into(), AMQPValue::LongLongInt(7));
        assert_eq!(
            recorded(&BasicProperties::default().with_headers(other)),
            Ok(0)
        );
    }

    #[test]
    fn every_integer_width_is_read() {
        for (value, n) in [
            (AMQPValue::LongLongInt(3), 3),
            (AMQPValue::LongInt(4), 4),
            (AMQPValue::LongUInt(5), 5),
            (AMQPValue::ShortInt(6), 6),
            (AMQPValue::ShortUInt(7), 7),
            (AMQPValue::ShortShortInt(8), 8),
            (AMQPValue::ShortShortUInt(9), 9),
            (AMQPValue::LongLongInt(0), 0),
        ] {
            assert_eq!(recorded(&with(value.clone())), Ok(n), "{value:?}");
        }
        assert_eq!(
            recorded(&with(AMQPValue::LongLongInt(i64::MAX))),
            Ok(u32::MAX)
        );
    }

    #[test]
    fn malformed_values_are_errors_naming_what_was_found() {
        for value in [
            AMQPValue::LongString(LongString::from("3")),
            AMQPValue::Boolean(true),
            AMQPValue::Double(2.0),
            AMQPValue::LongLongInt(-1),
            AMQPValue::ShortShortInt(-128),
        ] {
            let e = recorded(&with(value.clone())).unwrap_err();
            assert!(!e.is_empty(), "{value:?}");
        }
        assert_eq!(
            recorded(&with(AMQPValue::LongLongInt(-2))),
            Err("-2".into())
        );
    }

    #[test]
    fn a_first_return_goes_back_to_the_work_queue_and_later_ones_to_the_suspect_queue() {
        assert_eq!(verdict(0, 5), Verdict::Again { count: 1 });
        assert_eq!(verdict(1, 5), Verdict::Suspect { count: 2 });
        assert_eq!(verdict(3, 5), Verdict::Suspect { count: 4 });
    }

    #[test]
    fn a_count_above_0_or_unreadable_says_the_job_came_back_before() {
        assert!(!returned_before(&BasicProperties::default()));
        assert!(!returned_before(&with(AMQPValue::LongLongInt(0))));
        assert!(returned_before(&with(AMQPValue::LongLongInt(1))));
        assert!(returned_before(&with(AMQPValue::Boolean(true))));
    }

    #[test]
    fn at_the_limit_a_job_is_dead_lettered_with_its_count() {
        assert_eq!(
            verdict(4, 5),
            Verdict::DeadLetter {
                count: 5,
                reason: "delivered 5 times without being settled: the worker died or lost \
                         its connection while handling it (or could not settle it)"
                    .into()
            }
        );
        // A count already past the limit (the limit was lowered) too.
        assert!(matches!(
            verdict(9, 5),
            Verdict::DeadLetter { count: 10, .. }
        ));
        // Limit 1: the first unsettled delivery is the last.
        assert!(matches!(
            verdict(0, 1),
            Verdict::DeadLetter { count: 1, .. }
        ));
        // Limit 2: one second chance, in the work queue.
        assert_eq!(verdict(0, 2), Verdict::Again { count: 1 });
    }

    #[test]
    fn counts_never_overflow() {
        assert!(matches!(
            verdict(u32::MAX, 5),
            Verdict::DeadLetter {
                count: u32::MAX,
                ..
            }
        ));
        assert_eq!(
            verdict(u32::MAX - 2, u32::MAX),
            Verdict::Suspect {
                count: u32::MAX - 1
            }
        );
    }
}
