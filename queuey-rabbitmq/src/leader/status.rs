//! The status of a schedule, for operators' tools: what its leader
//! expects, in a one-message queue beside the schedule's queue.
//!
//! The schedule queue's state message is held by the leader and so cannot
//! be read; the leader copies what a tool needs (the last tick, the next
//! one, the schedule as text) into `{key}.status`, a classic queue that
//! keeps only its latest message (`x-max-length` 1, `drop-head`). A tool
//! reads it with a get and hands it back.

use std::time::{SystemTime, UNIX_EPOCH};

use lapin::types::{AMQPValue, FieldTable, LongString};

/// The status queue of the schedule queue `key`.
pub(crate) fn status_queue(key: &str) -> String {
    format!("{key}.status")
}

/// The status queue's arguments.
pub(crate) fn arguments() -> FieldTable {
    let mut table = FieldTable::default();
    table.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("classic")),
    );
    table.insert("x-max-length".into(), AMQPValue::LongInt(1));
    table.insert(
        "x-overflow".into(),
        AMQPValue::LongString(LongString::from("drop-head")),
    );
    table
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The body of a status message.
pub(crate) fn encode(
    last_tick: Option<SystemTime>,
    next_tick: Option<SystemTime>,
    schedule: &str,
) -> Vec<u8> {
    serde_json::json!({
        "v": 1,
        "schedule": schedule,
        "last_tick_ms": last_tick.map(ms),
        "next_tick_ms": next_tick.map(ms),
        "at_ms": ms(SystemTime::now()),
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_status_names_both_ticks_and_the_schedule() {
        let body = encode(Some(UNIX_EPOCH + Duration::from_secs(1)), None, "every 1s");
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["last_tick_ms"], 1_000);
        assert!(value["next_tick_ms"].is_null());
        assert_eq!(value["schedule"], "every 1s");
        assert_eq!(status_queue("q.periodic.beat"), "q.periodic.beat.status");
    }
}
