//! The status of a schedule, for operators' tools: what its leader
//! expects, in a one-message queue beside the schedule's queue.
//!
//! The leader holds the state message, so it copies what a tool needs (the
//! last tick, the next one, the schedule as text) into `{key}.status`, a
//! classic queue keeping only its latest message: a tool reads it with a
//! get and hands it back (a classic queue has no delivery limit to spend).
//!
//! It is also the schedule's second memory: a process taking over reads
//! the last tick here too, so a lost state message does not make the
//! schedule start over. It is believed by the same rules as a state.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` in milliseconds since the Unix epoch (0 before it).
pub(super) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The last tick a status message says was fired, if it says one (a body
/// that is not a status says none).
pub(crate) fn decode_last_tick(body: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("last_tick_ms")?.as_u64()
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
        assert_eq!(decode_last_tick(&body), Some(1_000));
        assert_eq!(decode_last_tick(&encode(None, None, "every 1s")), None);
        assert_eq!(decode_last_tick(b"not json"), None);
        assert_eq!(decode_last_tick(br#"{"last_tick_ms":-5}"#), None);
    }
}
