//! The limits a control record must keep, and why one is refused.

use std::time::Duration;

/// The largest control record accepted, encoded: far above any honest
/// command, far below what would slow a reader.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// How far ahead of a reader's clock a record may be stamped: hosts'
/// clocks disagree a little, never by this much.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// The most payload conditions one cancel filter may hold.
pub const MAX_PAYLOAD_CONDITIONS: usize = 16;

/// Why a control record is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordRefusal {
    /// The encoded record is larger than [`MAX_RECORD_BYTES`].
    #[error("the command is {bytes} bytes encoded, over the {MAX_RECORD_BYTES}-byte limit")]
    TooLarge {
        /// Its size in bytes.
        bytes: usize,
    },
    /// It says it was sent after the reader's clock plus [`CLOCK_SKEW`].
    #[error(
        "the command is stamped {at_ms} ms since the epoch, more than {} s after this host's \
         clock ({now_ms}); check the sending host's clock",
        CLOCK_SKEW.as_secs()
    )]
    FromTheFuture {
        /// Its `at_ms`.
        at_ms: u64,
        /// The reader's clock.
        now_ms: u64,
    },
    /// A queue name that is empty or over 255 bytes.
    #[error("the command names a queue that is empty or over 255 bytes")]
    BadQueueName,
    /// A cancel filter with no condition: it would cancel every job.
    #[error(
        "a cancel filter needs at least one condition (a queue, a job type or a payload \
         field); to stop a whole queue, pause it instead"
    )]
    NoCondition,
    /// A cancel filter with more than [`MAX_PAYLOAD_CONDITIONS`] payload
    /// conditions.
    #[error("a cancel filter may hold at most {MAX_PAYLOAD_CONDITIONS} payload conditions")]
    TooManyConditions,
    /// A cancel filter without `enqueued_before_ms`, or with one later
    /// than the record: it would cancel jobs not yet enqueued.
    #[error(
        "a cancel filter must say which jobs existed when it was sent (`enqueued_before_ms` \
         no later than the command): build it with `CancelFilter::into_command`"
    )]
    Unbounded,
}

impl RecordRefusal {
    /// A short name for metrics and logs (`too_large`, `from_the_future`,
    /// `bad_queue_name`, `no_condition`, `too_many_conditions`,
    /// `unbounded`).
    pub fn as_str(&self) -> &'static str {
        match self {
            RecordRefusal::TooLarge { .. } => "too_large",
            RecordRefusal::FromTheFuture { .. } => "from_the_future",
            RecordRefusal::BadQueueName => "bad_queue_name",
            RecordRefusal::NoCondition => "no_condition",
            RecordRefusal::TooManyConditions => "too_many_conditions",
            RecordRefusal::Unbounded => "unbounded",
        }
    }
}

impl From<RecordRefusal> for crate::Error {
    fn from(refusal: RecordRefusal) -> Self {
        crate::Error::invalid_config(refusal.to_string())
    }
}
