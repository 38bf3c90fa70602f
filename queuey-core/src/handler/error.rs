//! How a handler says a job failed, and the error types that carry that
//! intent through a service stack.

use std::fmt;
use std::time::Duration;

use crate::BoxError;

/// Why a job did not succeed, as the handler sees it.
///
/// - [`retryable`](JobError::retryable): transient; retried while the
///   policy has attempts left.
/// - [`fatal`](JobError::fatal): retrying cannot help; dead-lettered at once.
/// - [`deferred`](JobError::deferred): not a failure; put back for the given
///   time without spending an attempt, ahead of the backlog (the answer to a
///   `429` with `Retry-After`).
///
/// Any `std::error::Error + Send + Sync + 'static` converts into a retryable
/// `JobError`, so `?` works in handlers:
///
/// ```
/// use queuey_core::JobError;
///
/// fn parse(input: &str) -> Result<u32, JobError> {
///     let n: u32 = input.parse()?; // a ParseIntError becomes retryable
///     if n == 0 {
///         return Err(JobError::fatal("zero is never valid"));
///     }
///     Ok(n)
/// }
/// assert!(parse("x").unwrap_err().is_retryable());
/// assert!(parse("0").unwrap_err().is_fatal());
/// ```
///
/// `JobError` is not a `std::error::Error` (that would clash with the
/// blanket conversion); [`into_box_error`](JobError::into_box_error) makes a
/// [`RetryableError`], [`FatalError`] or [`DeferredError`] for the layers.
#[non_exhaustive]
pub enum JobError {
    /// A transient failure.
    Retryable(BoxError),
    /// A permanent failure.
    Fatal(BoxError),
    /// Put the job back for `delay`; spends no attempt.
    Deferred {
        /// How long to wait.
        delay: Duration,
        /// Why, for logs and traces.
        reason: Option<String>,
    },
}

impl JobError {
    /// A transient failure: retry while attempts are left.
    pub fn retryable(error: impl Into<BoxError>) -> Self {
        JobError::Retryable(error.into())
    }

    /// A permanent failure: dead-letter now.
    pub fn fatal(error: impl Into<BoxError>) -> Self {
        JobError::Fatal(error.into())
    }

    /// Defer the job by `delay` without spending an attempt.
    pub fn deferred(delay: Duration) -> Self {
        JobError::Deferred {
            delay,
            reason: None,
        }
    }

    /// Defer the job by `delay`, saying why.
    pub fn deferred_msg(delay: Duration, reason: impl Into<String>) -> Self {
        JobError::Deferred {
            delay,
            reason: Some(reason.into()),
        }
    }

    /// Whether this is a transient failure.
    pub fn is_retryable(&self) -> bool {
        matches!(self, JobError::Retryable(_))
    }

    /// Whether this is a permanent failure.
    pub fn is_fatal(&self) -> bool {
        matches!(self, JobError::Fatal(_))
    }

    /// The deferral delay, if this is a deferral.
    pub fn deferral(&self) -> Option<Duration> {
        match self {
            JobError::Deferred { delay, .. } => Some(*delay),
            _ => None,
        }
    }

    /// Converts into a boxed error that keeps the intent: a
    /// [`RetryableError`], [`FatalError`] or [`DeferredError`].
    pub fn into_box_error(self) -> BoxError {
        match self {
            JobError::Retryable(e) => Box::new(RetryableError(e)),
            JobError::Fatal(e) => Box::new(FatalError(e)),
            JobError::Deferred { delay, reason } => Box::new(DeferredError { delay, reason }),
        }
    }
}

impl<E> From<E> for JobError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        JobError::Retryable(Box::new(error))
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retryable(e) => f.debug_tuple("Retryable").field(e).finish(),
            JobError::Fatal(e) => f.debug_tuple("Fatal").field(e).finish(),
            JobError::Deferred { delay, reason } => f
                .debug_struct("Deferred")
                .field("delay", delay)
                .field("reason", reason)
                .finish(),
        }
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retryable(e) => write!(f, "{e}"),
            JobError::Fatal(e) => write!(f, "fatal: {e}"),
            JobError::Deferred { delay, reason } => write_deferral(f, *delay, reason.as_deref()),
        }
    }
}

fn write_deferral(
    f: &mut fmt::Formatter<'_>,
    delay: Duration,
    reason: Option<&str>,
) -> fmt::Result {
    write!(f, "deferred for {delay:?}")?;
    if let Some(reason) = reason {
        write!(f, ": {reason}")?;
    }
    Ok(())
}

/// A failure the handler marked as transient; it displays as its cause.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RetryableError(#[source] pub BoxError);

/// A failure the handler marked as permanent.
#[derive(Debug, thiserror::Error)]
#[error("fatal: {0}")]
pub struct FatalError(#[source] pub BoxError);

/// A request to put the job back for `delay` without spending an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredError {
    /// How long to wait.
    pub delay: Duration,
    /// Why, for logs and traces.
    pub reason: Option<String>,
}

impl fmt::Display for DeferredError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_deferral(f, self.delay, self.reason.as_deref())
    }
}

impl std::error::Error for DeferredError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_mark_makes_it_retryable() {
        fn io() -> Result<(), JobError> {
            Err(std::io::Error::other("disk"))?;
            Ok(())
        }
        let e = io().unwrap_err();
        assert!(e.is_retryable());
        assert_eq!(e.to_string(), "disk");
    }

    #[test]
    fn box_error_keeps_the_intent() {
        let e = JobError::retryable("flaky").into_box_error();
        assert!(e.downcast_ref::<RetryableError>().is_some());
        assert_eq!(e.to_string(), "flaky");

        let e = JobError::fatal("bad input").into_box_error();
        assert_eq!(
            e.downcast_ref::<FatalError>().unwrap().to_string(),
            "fatal: bad input"
        );
        assert_eq!(
            std::error::Error::source(&*e).unwrap().to_string(),
            "bad input"
        );

        let e = JobError::deferred_msg(Duration::from_secs(30), "429").into_box_error();
        let d = e.downcast_ref::<DeferredError>().unwrap();
        assert_eq!(d.delay, Duration::from_secs(30));
        assert_eq!(d.to_string(), "deferred for 30s: 429");
    }

    #[test]
    fn accessors() {
        assert_eq!(
            JobError::deferred(Duration::from_secs(1)).deferral(),
            Some(Duration::from_secs(1))
        );
        assert_eq!(JobError::fatal("x").deferral(), None);
        assert!(JobError::fatal("x").is_fatal());
        assert!(!JobError::fatal("x").is_retryable());
        assert_eq!(
            JobError::deferred(Duration::from_millis(1500)).to_string(),
            "deferred for 1.5s"
        );
        assert!(format!("{:?}", JobError::retryable("r")).starts_with("Retryable"));
    }
}
