//! What can go wrong talking to a store.

use std::time::Duration;

use crate::BoxError;

/// A store operation that did not complete.
///
/// Callers in queuey treat every store error the same way: they fall back
/// to what the queue promises without the store (at-least-once, no
/// uniqueness check), count it and say so in a log line, so a store that
/// is down never loses or blocks a job. The variants tell the causes apart
/// for that line and for the operator reading it: a store that could not
/// be reached, one that did not answer in time, and one that answered but
/// refused the operation (a bad argument, a full or read-only server).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached: no connection, a connection lost or
    /// refused.
    #[error("the store is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store did not answer within the bound the caller set.
    #[error("the store did not answer within {0:?}")]
    TimedOut(Duration),
    /// The store answered and refused the operation: it is reachable, but
    /// what it was asked is not something it does (an argument out of its
    /// range, a read-only replica, out of memory, a script error).
    #[error("the store refused the operation: {0}")]
    Refused(#[source] BoxError),
}

impl StoreError {
    /// An unavailable store, from any error.
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        StoreError::Unavailable(error.into())
    }

    /// A refusal by a store that answered, from any error.
    pub fn refused(error: impl Into<BoxError>) -> Self {
        StoreError::Refused(error.into())
    }

    /// A short name of the cause, for a metric label or a log field:
    /// `unavailable`, `timed_out` or `refused`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Unavailable(_) => "unavailable",
            StoreError::TimedOut(_) => "timed_out",
            StoreError::Refused(_) => "refused",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_told_apart_from_a_store_that_is_gone() {
        let refused = StoreError::refused("ERR invalid expire time in 'set' command");
        assert_eq!(refused.kind(), "refused");
        assert!(refused.to_string().starts_with("the store refused"));
        assert!(!refused.to_string().contains("unavailable"));
        let gone = StoreError::unavailable("connection refused");
        assert_eq!(gone.kind(), "unavailable");
        assert_eq!(
            StoreError::TimedOut(Duration::from_millis(5)).kind(),
            "timed_out"
        );
    }
}
