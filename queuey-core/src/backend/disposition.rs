//! What happens to a delivery once its job has run, decided by the worker
//! and carried out by the backend.

use std::fmt;
use std::time::Duration;

use crate::Envelope;
use crate::wait::{LONGEST_WAIT, fits_a_hold};

/// The outcome of running a job, which a [`Delivery`](super::Delivery)
/// carries out on the broker with [`settle`](super::Delivery::settle).
///
/// The worker's layers decide it without touching the broker; the backend
/// builds what it publishes from the delivered envelope ([`Disposition::plan`]):
///
/// | disposition | on the broker |
/// |---|---|
/// | `Ack` | acknowledge |
/// | `Retry { delay }` | publish the next attempt (attempt + 1, priority 0) to a hold of `delay`, wait for the confirm, acknowledge |
/// | `Defer { delay }` | publish the job unchanged but for deferrals + 1 at the queue's top priority to a hold of `delay`, wait for the confirm, acknowledge |
/// | `DeadLetter { reason }` | publish to the dead-letter queue with `reason`, wait for the confirm, acknowledge |
/// | `Requeue` | hand the message back for delivery again at once, spending nothing: no attempt, and it does not count as a delivery that came back unsettled |
///
/// A `Retry` or `Defer` longer than [`LONGEST_WAIT`] is dead-lettered with a
/// reason saying so, never released early.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Hand the message back unchanged for delivery again at once (how a
    /// worker shutting down returns a delivery it did not start).
    Requeue,
}

/// Which hold a [`Plan::Hold`] goes to; each has its own granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldKind {
    /// A retry: retry granularity, the envelope's own priority (0).
    Retry,
    /// A deferral: deferral granularity, the queue's top priority.
    Deferral,
}

/// What a backend does to settle a delivery: a [`Disposition`] with the
/// next envelope built. See [`Disposition::plan`].
// Boxing a hold's envelope would cost an allocation per retry and deferral.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Acknowledge.
    Ack,
    /// Publish `next` to a hold of `delay`, then acknowledge.
    Hold {
        /// The envelope to publish, aimed at the delivery's queue.
        next: Envelope,
        /// How long it waits, at least.
        delay: Duration,
        /// Which hold.
        kind: HoldKind,
    },
    /// Publish the delivered message to the dead-letter store, then
    /// acknowledge.
    DeadLetter {
        /// Why.
        reason: String,
    },
    /// Hand the message back for immediate delivery.
    Requeue,
}

impl Disposition {
    /// A short lowercase name (`ack`, `retry`, `defer`, `dead_letter`,
    /// `requeue`), used as a metrics label.
    pub fn as_str(&self) -> &'static str {
        match self {
            Disposition::Ack => "ack",
            Disposition::Retry { .. } => "retry",
            Disposition::Defer { .. } => "defer",
            Disposition::DeadLetter { .. } => "dead_letter",
            Disposition::Requeue => "requeue",
        }
    }

    /// This disposition, except that a retry or deferral longer than
    /// [`LONGEST_WAIT`] becomes a dead letter whose reason says so.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_core::Disposition;
    ///
    /// let hour = Disposition::Defer { delay: Duration::from_secs(3600) };
    /// assert_eq!(hour.clone().never_early(), hour);
    /// let month = Disposition::Defer { delay: Duration::from_secs(30 * 86_400) };
    /// assert!(matches!(month.never_early(), Disposition::DeadLetter { .. }));
    /// ```
    pub fn never_early(self) -> Disposition {
        match self {
            Disposition::Retry { delay } | Disposition::Defer { delay } if !fits_a_hold(delay) => {
                Disposition::DeadLetter {
                    reason: too_long_reason(&self, delay),
                }
            }
            other => other,
        }
    }

    /// Builds what a backend publishes for this disposition of `delivered`
    /// from `queue`, the one place the next envelope is made: a retry goes
    /// back to `queue` with attempt + 1 and priority 0; a deferral keeps the
    /// attempt, one more deferral (the backend gives it the top priority);
    /// a wait past [`LONGEST_WAIT`] becomes a dead letter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queuey_core::Envelope;
    /// use queuey_core::Disposition;
    /// use queuey_core::backend::{HoldKind, Plan};
    ///
    /// let payload = serde_json::value::to_raw_value(&1).unwrap();
    /// let delivered = Envelope::new("t", "q", payload);
    /// let Plan::Hold { next, kind, .. } =
    ///     Disposition::Retry { delay: Duration::from_secs(1) }.plan(&delivered, "q")
    /// else { unreachable!() };
    /// assert_eq!((next.attempt, kind), (2, HoldKind::Retry));
    ///
    /// let month = Duration::from_secs(30 * 24 * 3600);
    /// let plan = Disposition::Defer { delay: month }.plan(&delivered, "q");
    /// assert!(matches!(plan, Plan::DeadLetter { .. }));
    /// ```
    pub fn plan(self, delivered: &Envelope, queue: &str) -> Plan {
        match self.never_early() {
            Disposition::Ack => Plan::Ack,
            Disposition::Requeue => Plan::Requeue,
            Disposition::DeadLetter { reason } => Plan::DeadLetter { reason },
            Disposition::Retry { delay } => Plan::Hold {
                next: delivered.next_attempt().for_queue(queue),
                delay,
                kind: HoldKind::Retry,
            },
            Disposition::Defer { delay } => Plan::Hold {
                next: delivered.deferred(delivered.priority).for_queue(queue),
                delay,
                kind: HoldKind::Deferral,
            },
        }
    }
}

/// The dead-letter reason of a wait no hold can keep.
pub fn too_long_reason(disposition: &Disposition, delay: Duration) -> String {
    let what = match disposition {
        Disposition::Defer { .. } => "deferral",
        _ => "retry",
    };
    // Whole seconds, or milliseconds below one second.
    let wait = match delay.as_secs() {
        0 => format!("{} ms", delay.as_millis()),
        secs => format!("{secs} s"),
    };
    format!(
        "a {what} of {wait} is longer than a hold can keep ({} days); dead-lettered rather than \
         released early",
        LONGEST_WAIT.as_secs() / 86_400
    )
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disposition::Ack => f.write_str("ack"),
            Disposition::Retry { delay } => write!(f, "retry in {delay:?}"),
            Disposition::Defer { delay } => write!(f, "defer for {delay:?}"),
            Disposition::DeadLetter { reason } => write!(f, "dead-letter: {reason}"),
            Disposition::Requeue => f.write_str("requeue"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered() -> Envelope {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        Envelope::new("t", "first", payload).with_priority(7)
    }

    #[test]
    fn names_and_display() {
        let d = Duration::from_millis(1500);
        assert_eq!(Disposition::Ack.as_str(), "ack");
        assert_eq!(Disposition::Retry { delay: d }.to_string(), "retry in 1.5s");
        assert_eq!(Disposition::Defer { delay: d }.as_str(), "defer");
        assert_eq!(Disposition::Requeue.to_string(), "requeue");
        let dead = Disposition::DeadLetter {
            reason: "boom".into(),
        };
        assert_eq!(
            (dead.as_str(), dead.to_string().as_str()),
            ("dead_letter", "dead-letter: boom")
        );
    }

    #[test]
    fn a_retry_spends_an_attempt_at_priority_zero_on_the_consumed_queue() {
        let delay = Duration::from_secs(3);
        let plan = Disposition::Retry { delay }.plan(&delivered(), "q");
        let Plan::Hold {
            next,
            delay: d,
            kind,
        } = plan
        else {
            panic!("{plan:?}")
        };
        assert_eq!((next.attempt, next.priority, next.deferrals), (2, 0, 0));
        assert_eq!(
            (next.queue.as_str(), d, kind),
            ("q", delay, HoldKind::Retry)
        );
    }

    #[test]
    fn a_deferral_spends_no_attempt() {
        let plan = Disposition::Defer {
            delay: Duration::from_secs(3),
        }
        .plan(&delivered(), "q");
        let Plan::Hold { next, kind, .. } = plan else {
            panic!("{plan:?}")
        };
        assert_eq!((next.attempt, next.deferrals), (1, 1));
        assert_eq!(kind, HoldKind::Deferral);
    }

    #[test]
    fn waits_past_the_longest_hold_are_dead_lettered_never_shortened() {
        assert!(matches!(
            Disposition::Retry {
                delay: LONGEST_WAIT
            }
            .plan(&delivered(), "q"),
            Plan::Hold { .. }
        ));
        let month = Duration::from_secs(30 * 86_400);
        let Plan::DeadLetter { reason } =
            Disposition::Defer { delay: month }.plan(&delivered(), "q")
        else {
            panic!("not dead-lettered")
        };
        assert_eq!(
            reason,
            "a deferral of 2592000 s is longer than a hold can keep (24 days); dead-lettered \
             rather than released early"
        );
    }
}
