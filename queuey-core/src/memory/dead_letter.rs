//! What the memory backend keeps of a dead-lettered job.

use crate::{DecodeError, Envelope};

/// A dead-lettered message, as [`MemoryBackend::dead_letters`](super::MemoryBackend::dead_letters)
/// returns it. The fields mirror the headers the RabbitMQ backend puts on a
/// `q.dead` message (`x-death-reason`, `x-original-queue`, `x-attempts`,
/// `x-died-at`, `x-parse-error`).
///
/// Earlier attempts' errors are in the body's [`Envelope::errors`]; the
/// last one's is the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Why the job was dead-lettered.
    pub reason: String,
    /// The queue it was consumed from.
    pub original_queue: String,
    /// The attempts it made (0 for a body that was not an envelope).
    pub attempts: u32,
    /// When it was dead-lettered, in milliseconds since the Unix epoch.
    pub died_at_ms: u64,
    /// Why the body is not an envelope, for a dead letter with the reason
    /// `malformed envelope`; `None` otherwise.
    pub parse_error: Option<String>,
    /// The message body, verbatim.
    pub body: Vec<u8>,
}

impl DeadLetter {
    /// The body decoded as an envelope; an error for malformed bodies.
    pub fn envelope(&self) -> Result<Envelope, DecodeError> {
        Envelope::decode(&self.body)
    }
}
