//! What a worker does with a job once its stack has answered.

use std::fmt;
use std::time::Duration;

/// The outcome of running a job, which the worker carries out on the broker.
///
/// Layers turn errors into dispositions without touching the broker; the
/// worker then settles the delivery:
///
/// | disposition | on the broker |
/// |---|---|
/// | `Ack` | acknowledge |
/// | `Retry { delay }` | publish the next attempt (attempt + 1, priority 0) to a hold of `delay`, wait for the confirm, acknowledge |
/// | `Defer { delay }` | publish the job unchanged but for deferrals + 1 at the queue's top priority to a hold of `delay`, wait for the confirm, acknowledge |
/// | `DeadLetter { reason }` | publish to the dead-letter queue with `reason`, wait for the confirm, acknowledge |
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// The job is done.
    Ack,
    /// Try again after `delay`, spending an attempt.
    Retry {
        /// How long to wait.
        delay: Duration,
    },
    /// Try again after `delay`, spending no attempt, ahead of the backlog.
    Defer {
        /// How long to wait.
        delay: Duration,
    },
    /// Give up: keep the job in the dead-letter queue with `reason`.
    DeadLetter {
        /// Why, for the operator reading the dead-letter queue.
        reason: String,
    },
}

impl Disposition {
    /// A short lowercase name (`ack`, `retry`, `defer`, `dead_letter`), used
    /// as a metrics label.
    pub fn as_str(&self) -> &'static str {
        match self {
            Disposition::Ack => "ack",
            Disposition::Retry { .. } => "retry",
            Disposition::Defer { .. } => "defer",
            Disposition::DeadLetter { .. } => "dead_letter",
        }
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disposition::Ack => f.write_str("ack"),
            Disposition::Retry { delay } => write!(f, "retry in {delay:?}"),
            Disposition::Defer { delay } => write!(f, "defer for {delay:?}"),
            Disposition::DeadLetter { reason } => write!(f, "dead-letter: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_display() {
        let d = Duration::from_millis(1500);
        assert_eq!(Disposition::Ack.as_str(), "ack");
        assert_eq!(Disposition::Retry { delay: d }.to_string(), "retry in 1.5s");
        assert_eq!(Disposition::Defer { delay: d }.as_str(), "defer");
        let dead = Disposition::DeadLetter {
            reason: "boom".into(),
        };
        assert_eq!(
            (dead.as_str(), dead.to_string().as_str()),
            ("dead_letter", "dead-letter: boom")
        );
    }
}
