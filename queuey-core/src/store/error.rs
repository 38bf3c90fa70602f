//! What can go wrong talking to a store.

use std::time::Duration;

use crate::BoxError;

/// A store operation that did not complete.
///
/// Callers in queuey treat every store error the same way: they fall back
/// to what the queue promises without the store (at-least-once, no
/// uniqueness check) and say so in a log line, so a store that is down
/// never loses or blocks a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or refused the operation.
    #[error("the store is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store did not answer within the bound the caller set.
    #[error("the store did not answer within {0:?}")]
    TimedOut(Duration),
}

impl StoreError {
    /// An unavailable store, from any error.
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        StoreError::Unavailable(error.into())
    }
}
