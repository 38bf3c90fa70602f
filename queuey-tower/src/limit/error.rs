//! The error of a limit that could never let a job start.

use std::fmt;

/// A concurrency limit of zero: no job of a key could ever run. Give at
/// least 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZeroConcurrency {
    _priv: (),
}

impl ZeroConcurrency {
    pub(crate) fn new() -> Self {
        ZeroConcurrency { _priv: () }
    }
}

impl fmt::Display for ZeroConcurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a concurrency limit of 0 would never let a job of a key run; give at least 1")
    }
}

impl std::error::Error for ZeroConcurrency {}
