//! Telling operators what the fleet plane refused: a counter per kind of
//! message and reason, and one WARN line per kind a minute at most, with
//! how many were refused since the last one.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use queuey_core::control::RecordRefusal;

/// Counter: messages of the fleet plane refused, by `kind` and `reason`.
pub(crate) const REFUSED: &str = "queuey_rabbitmq_fleet_refused_total";

/// The shortest time between two WARN lines about one kind of message.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// The kinds of message the fleet plane reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    #[cfg(feature = "fleet")]
    Command,
    #[cfg(feature = "fleet")]
    Heartbeat,
    #[cfg(feature = "fleet")]
    ScheduleState,
    Reply,
}

impl Kind {
    /// At least as many as there are kinds: every index is below it.
    const ALL: usize = 4;

    fn as_str(self) -> &'static str {
        match self {
            #[cfg(feature = "fleet")]
            Kind::Command => "command",
            #[cfg(feature = "fleet")]
            Kind::Heartbeat => "heartbeat",
            #[cfg(feature = "fleet")]
            Kind::ScheduleState => "schedule_state",
            Kind::Reply => "reply",
        }
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It carries no `user_id`.
    Unsigned,
    /// Its `user_id` is a user not trusted for it.
    Stranger(String),
    /// It is larger than its kind's limit.
    TooLarge(usize),
    /// It does not decode as its kind.
    #[cfg(feature = "fleet")]
    Malformed,
    /// Its content breaks a rule (a command's, or a state from the future).
    Invalid(String),
}

impl Refusal {
    fn reason(&self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::Stranger(_) => "untrusted_sender",
            Refusal::TooLarge(_) => "too_large",
            #[cfg(feature = "fleet")]
            Refusal::Malformed => "malformed",
            Refusal::Invalid(_) => "invalid",
        }
    }
}

impl From<RecordRefusal> for Refusal {
    fn from(refusal: RecordRefusal) -> Self {
        match refusal {
            RecordRefusal::TooLarge { bytes } => Refusal::TooLarge(bytes),
            other => Refusal::Invalid(other.to_string()),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unsigned => f.write_str("it names no sender (no `user_id`)"),
            Refusal::Stranger(user) => write!(
                f,
                "its sender `{}` is not trusted for it",
                queuey_core::escape::Untrusted(user)
            ),
            Refusal::TooLarge(bytes) => write!(f, "it is {bytes} bytes, over its limit"),
            #[cfg(feature = "fleet")]
            Refusal::Malformed => f.write_str("it does not decode"),
            Refusal::Invalid(why) => f.write_str(why),
        }
    }
}

/// What was refused since the last WARN line, per kind.
struct Tally {
    last_log: [Option<Instant>; Kind::ALL],
    since: [u64; Kind::ALL],
}

static TALLY: Mutex<Tally> = Mutex::new(Tally {
    last_log: [None; Kind::ALL],
    since: [0; Kind::ALL],
});

/// Counts a refused message of `kind`, and logs it unless a line about
/// this kind was logged less than a minute ago (that line's successor
/// says how many came between).
pub(crate) fn refused(kind: Kind, refusal: &Refusal) {
    metrics::counter!(REFUSED, "kind" => kind.as_str(), "reason" => refusal.reason()).increment(1);
    let now = Instant::now();
    let logged_with = {
        let mut tally = TALLY.lock().unwrap_or_else(|p| p.into_inner());
        let i = kind as usize;
        tally.since[i] += 1;
        let due = tally.last_log[i].is_none_or(|at| now.duration_since(at) >= LOG_EVERY);
        if due {
            tally.last_log[i] = Some(now);
            Some(std::mem::take(&mut tally.since[i]))
        } else {
            None
        }
    };
    if let Some(count) = logged_with {
        tracing::warn!(
            kind = kind.as_str(),
            reason = refusal.reason(),
            refused = count,
            "refused a {} of the fleet plane: {refusal}; ignored (this line comes at most once a \
             minute per kind, `refused` counts them all since the last one)",
            kind.as_str().replace('_', " ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_well_and_escape_the_sender() {
        assert_eq!(
            Refusal::Stranger("eve\u{1b}]0;x\u{7}".into()).to_string(),
            format!(
                "its sender `{}` is not trusted for it",
                queuey_core::escape::Untrusted("eve\u{1b}]0;x\u{7}")
            )
        );
        assert!(
            !Refusal::Stranger("eve\u{1b}".into())
                .to_string()
                .contains('\u{1b}')
        );
        assert_eq!(
            Refusal::from(RecordRefusal::TooLarge { bytes: 9 }),
            Refusal::TooLarge(9)
        );
        assert_eq!(Refusal::Unsigned.reason(), "unsigned");
    }
}
