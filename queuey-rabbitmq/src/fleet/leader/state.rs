//! The state message of a schedule: the last tick fired.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The body of a state message. `last_tick_ms` is `None` for a schedule
/// that never fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    /// The format's version.
    pub(crate) v: u32,
    /// The last tick fired, in milliseconds since the Unix epoch.
    pub(crate) last_tick_ms: Option<u64>,
}

impl State {
    pub(crate) fn new(last: Option<SystemTime>) -> Self {
        State::at_ms(last.map(super::status::ms))
    }

    /// A state whose last tick was at `last_tick_ms`.
    pub(crate) fn at_ms(last_tick_ms: Option<u64>) -> Self {
        State { v: 1, last_tick_ms }
    }

    pub(crate) fn last_tick(&self) -> Option<SystemTime> {
        self.last_tick_ms
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::json!({ "v": self.v, "last_tick_ms": self.last_tick_ms })
            .to_string()
            .into_bytes()
    }

    /// A body that is not a state (someone published by hand) reads as a
    /// schedule that never fired, so folding drops it.
    pub(crate) fn decode(body: &[u8]) -> Self {
        State::at_ms(super::status::decode_last_tick(body))
    }

    /// Whether a leader holding `self` keeps `other` instead: the later
    /// tick wins, and of two equal ones the newer message (`other`), so
    /// the message held unacknowledged is always the youngest.
    pub(crate) fn yields_to(&self, other: &State) -> bool {
        other.last_tick_ms >= self.last_tick_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_garbage() {
        let s = State::new(Some(UNIX_EPOCH + Duration::from_millis(1_234)));
        assert_eq!(State::decode(&s.encode()), s);
        assert_eq!(
            s.last_tick(),
            Some(UNIX_EPOCH + Duration::from_millis(1_234))
        );
        assert_eq!(State::decode(b"not json").last_tick(), None);
        assert_eq!(
            String::from_utf8(State::new(None).encode()).unwrap(),
            r#"{"last_tick_ms":null,"v":1}"#
        );
    }

    #[test]
    fn folding_keeps_the_latest_tick_and_the_newest_message() {
        let none = State::new(None);
        let one = State::new(Some(UNIX_EPOCH + Duration::from_secs(1)));
        let two = State::new(Some(UNIX_EPOCH + Duration::from_secs(2)));
        assert!(none.yields_to(&one));
        assert!(!one.yields_to(&none));
        assert!(one.yields_to(&two));
        assert!(!two.yields_to(&one));
        assert!(one.yields_to(&one));
    }
}
