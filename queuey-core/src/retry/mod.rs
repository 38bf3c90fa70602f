//! Retry policies: how many attempts a job gets and how long it waits
//! between them.

mod backoff;

use std::time::Duration;

pub use backoff::{Backoff, ExponentialBackoff, InvalidBackoff};

/// How many attempts a job gets, and the [`Backoff`] between them.
///
/// The job's (`#[job(retry(..))]`), else its queue's (`#[queue(retry(..))]`,
/// [`QueueConfig::retry`](crate::QueueConfig::retry)), else the retry layer's.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::{Backoff, RetryPolicy};
///
/// let policy = RetryPolicy::new(
///     3,
///     Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(60))?,
/// )?;
/// assert!(policy.has_attempts_left(2));
/// assert!(!policy.has_attempts_left(3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
}

/// Why a retry policy could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRetryPolicy {
    /// `max_attempts` was 0; a job always gets at least one attempt.
    #[error("max_attempts must be at least 1 (the first attempt counts)")]
    ZeroAttempts,
}

impl RetryPolicy {
    /// Attempts in the default policy, the first one included.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

    /// A policy allowing `max_attempts` attempts in all, the first included.
    pub fn new(max_attempts: u32, backoff: Backoff) -> Result<Self, InvalidRetryPolicy> {
        if max_attempts == 0 {
            return Err(InvalidRetryPolicy::ZeroAttempts);
        }
        Ok(RetryPolicy {
            max_attempts,
            backoff,
        })
    }

    /// A policy that never retries: the first failure is final.
    pub fn never() -> Self {
        RetryPolicy {
            max_attempts: 1,
            backoff: Backoff::None,
        }
    }

    /// Attempts in all, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait between attempts.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// Whether a job whose attempt `attempt` just failed may try again.
    pub fn has_attempts_left(&self, attempt: u32) -> bool {
        attempt < self.max_attempts
    }

    /// The wait after attempt `attempt` failed, jitter included.
    pub fn delay_after(&self, attempt: u32) -> Duration {
        self.backoff.delay(attempt)
    }
}

impl Default for RetryPolicy {
    /// Five attempts; exponential backoff from 1 s, doubling, capped at
    /// 5 minutes, with full jitter.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::Exponential(ExponentialBackoff::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_attempts_is_refused() {
        assert_eq!(
            RetryPolicy::new(0, Backoff::None),
            Err(InvalidRetryPolicy::ZeroAttempts)
        );
    }

    #[test]
    fn attempts_left() {
        let p = RetryPolicy::new(3, Backoff::None).unwrap();
        assert!(p.has_attempts_left(1));
        assert!(p.has_attempts_left(2));
        assert!(!p.has_attempts_left(3));
        assert!(!p.has_attempts_left(4));
        assert!(!RetryPolicy::never().has_attempts_left(1));
    }

    #[test]
    fn default_policy() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts(), 5);
        assert_eq!(p.backoff().base_delay(1), Duration::from_secs(1));
        assert_eq!(p.backoff().max_delay(), Duration::from_secs(300));
        assert!(p.delay_after(4) <= Duration::from_secs(8));
    }
}
