use std::time::Duration;

/// Why a [`Schedule`](super::Schedule) could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidSchedule {
    /// An interval shorter than a millisecond.
    #[error("the interval of a schedule must be at least 1 ms, got {0:?}")]
    Interval(Duration),
    /// A cron expression that does not parse.
    #[error("the cron expression `{expression}` does not parse: {reason}")]
    Cron {
        /// The expression given.
        expression: String,
        /// What the parser said.
        reason: String,
    },
    /// A cron expression that parses but never fires (the 31st of
    /// February, say): a leader would hold the schedule doing nothing.
    #[error(
        "the cron expression `{expression}` never fires (no date matches all its fields): \
         check the day of month against the month"
    )]
    NeverFires {
        /// The expression given.
        expression: String,
    },
    /// A time zone name the time zone database does not know.
    #[error(
        "the time zone `{zone}` is unknown: give an IANA name such as `Europe/Amsterdam` or \
         `UTC`, and check that the time zone database is installed (/usr/share/zoneinfo)"
    )]
    Zone {
        /// The name given.
        zone: String,
    },
    /// A schedule or periodic job name that cannot name a schedule.
    #[error(
        "the schedule name `{0}` is not usable: give 1 to 120 characters of letters, digits, \
         `-`, `_` or `.`"
    )]
    Name(String),
}
