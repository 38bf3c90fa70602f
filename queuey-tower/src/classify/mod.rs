//! Classifying errors into what should happen next.
//!
//! A service stack's errors are `BoxError`s of any type: a handler's
//! [`JobError`](queuey_core::JobError), tower's `Elapsed` from a timeout or
//! `Overloaded` from a load shed, a client library's error surfacing from a
//! layer of the user's own. What each one means is decided **once per
//! stack**, in the spirit of tower-http's response classifiers: the request
//! carries one [`Classify`] implementation ([`JobRequest::classifier`]) and
//! the retry, deferral and dead-letter layers, and the worker itself, all
//! ask it:
//!
//! - [`FailureClass::RetryAfter`]: not a failure; defer the job
//!   ([`DeferOn429`](struct@crate::DeferOn429) acts on it, and so do
//!   [`DeadLetterLayer`](crate::DeadLetterLayer) and the worker when no
//!   deferral layer did);
//! - [`FailureClass::Transient`]: retry while attempts are left
//!   ([`RetryLayer`](struct@crate::RetryLayer) acts on it);
//! - [`FailureClass::Fatal`]: give up at once.
//!
//! Set it for a whole worker with
//! [`WorkerBuilder::classifier`](crate::WorkerBuilder::classifier), or for
//! one stack with a [`ClassifyLayer`] outside the layers that read it.
//!
//! [`DefaultClassifier`] understands queuey's own error types and tower's
//! timeout and load shed; anything else is transient. Any
//! `Fn(&(dyn Error + 'static)) -> Option<FailureClass>` is a classifier too:
//! it is asked about the error and each of its sources, and the default
//! decides when it answers `None` for all of them:
//!
//! ```
//! use std::time::Duration;
//! use queuey_tower::classify::{Classify, DefaultClassifier, FailureClass};
//!
//! #[derive(Debug)]
//! struct HttpError { status: u16, retry_after: Option<u64> }
//! impl std::fmt::Display for HttpError {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         write!(f, "HTTP {}", self.status)
//!     }
//! }
//! impl std::error::Error for HttpError {}
//!
//! let classifier = |error: &(dyn std::error::Error + 'static)| {
//!     let http = error.downcast_ref::<HttpError>()?;
//!     Some(match (http.status, http.retry_after) {
//!         (429, Some(secs)) => FailureClass::RetryAfter(Duration::from_secs(secs)),
//!         (400..=499, _) => FailureClass::Fatal,
//!         _ => FailureClass::Transient,
//!     })
//! };
//!
//! let limited = HttpError { status: 429, retry_after: Some(30) };
//! assert_eq!(classifier.classify(&limited), FailureClass::RetryAfter(Duration::from_secs(30)));
//! assert_eq!(classifier.classify(&HttpError { status: 404, retry_after: None }), FailureClass::Fatal);
//! let other = std::io::Error::other("reset");
//! assert_eq!(classifier.classify(&other), DefaultClassifier.classify(&other));
//! ```

mod layer;
mod retry_after;
mod shared;

use std::error::Error as StdError;
use std::time::Duration;

use queuey_core::handler::{DeferredError, FatalError, RetryableError};

#[cfg(doc)]
use crate::JobRequest;
use crate::defer::DeferralLimitReached;

pub use layer::{ClassifyLayer, Classifying};
pub use retry_after::{parse_retry_after, parse_retry_after_at};
pub use shared::SharedClassifier;

/// How long a job shed by `tower::load_shed` (its service was not ready)
/// waits before it comes back: it is deferred, spending no attempt.
pub const OVERLOADED_WAIT: Duration = Duration::from_secs(1);

/// What an error means for the job that failed with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// A failure that may pass: retry while attempts are left.
    Transient,
    /// A failure retrying cannot fix: dead-letter now.
    Fatal,
    /// Not a failure: the job must wait this long (a `Retry-After`), spending
    /// no attempt.
    RetryAfter(Duration),
}

/// Decides what an error means. One instance serves a whole stack (it is
/// shared behind an `Arc`), so it needs no `Clone`.
pub trait Classify: Send + Sync + 'static {
    /// Classifies one error.
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass;
}

/// queuey's own classification; see the [module documentation](self).
///
/// It looks at the error and then at each of its sources, and the first one
/// it recognises decides:
///
/// | error | class |
/// |---|---|
/// | [`DeferredError`] (from `JobError::deferred`) | `RetryAfter(delay)` |
/// | [`FatalError`] (from `JobError::fatal`) | `Fatal` |
/// | [`RetryableError`] (from `JobError::retryable` or `?`) | `Transient` |
/// | [`DeferralLimitReached`] (from [`DeferOn429`](struct@crate::DeferOn429)) | `Transient` |
/// | `tower::timeout::error::Elapsed` | `Transient` |
/// | `tower::load_shed::error::Overloaded` | `RetryAfter(`[`OVERLOADED_WAIT`]`)` |
/// | anything else | `Transient` |
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultClassifier;

impl Classify for DefaultClassifier {
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass {
        let mut current: Option<&(dyn StdError + 'static)> = Some(error);
        while let Some(e) = current {
            if let Some(d) = e.downcast_ref::<DeferredError>() {
                return FailureClass::RetryAfter(d.delay);
            }
            if e.is::<tower::load_shed::error::Overloaded>() {
                return FailureClass::RetryAfter(OVERLOADED_WAIT);
            }
            if e.is::<FatalError>() {
                return FailureClass::Fatal;
            }
            if e.is::<RetryableError>()
                || e.is::<DeferralLimitReached>()
                || e.is::<tower::timeout::error::Elapsed>()
            {
                return FailureClass::Transient;
            }
            current = e.source();
        }
        FailureClass::Transient
    }
}

/// A closure asked about the error and then each of its sources in turn (so
/// it sees a client error a handler wrapped in `JobError::retryable`); the
/// first answer wins, and the [`DefaultClassifier`] decides when none comes.
impl<F> Classify for F
where
    F: Fn(&(dyn StdError + 'static)) -> Option<FailureClass> + Send + Sync + 'static,
{
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass {
        let mut current: Option<&(dyn StdError + 'static)> = Some(error);
        while let Some(e) = current {
            if let Some(class) = self(e) {
                return class;
            }
            current = e.source();
        }
        DefaultClassifier.classify(error)
    }
}

/// What an error that no layer turned into a disposition becomes: a
/// deferral for a `Retry-After` (a dead letter past the longest hold), else
/// a dead letter with the error's chain as the reason.
pub(crate) fn last_resort(
    class: FailureClass,
    error: &(dyn StdError + 'static),
) -> crate::Disposition {
    match class {
        FailureClass::RetryAfter(delay) => crate::Disposition::Defer { delay }.never_early(),
        FailureClass::Transient | FailureClass::Fatal => crate::Disposition::DeadLetter {
            reason: error_chain(error),
        },
    }
}

/// Joins an error and its sources with `": "`, the form dead-letter reasons
/// take.
pub(crate) fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(e) = current {
        let next = e.to_string();
        // Wrappers that display as their source would repeat it.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        current = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;
    use queuey_core::{BoxError, JobError};

    /// Wraps an error with a message, keeping it as the source.
    #[derive(Debug)]
    struct Context {
        message: String,
        source: BoxError,
    }

    impl Context {
        fn new(message: impl Into<String>, source: BoxError) -> Self {
            Context {
                message: message.into(),
                source,
            }
        }
    }

    impl fmt::Display for Context {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.message)
        }
    }

    impl StdError for Context {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.source)
        }
    }

    fn class(e: BoxError) -> FailureClass {
        DefaultClassifier.classify(&*e)
    }

    #[test]
    fn default_classes() {
        let d = Duration::from_secs(3);
        assert_eq!(
            class(JobError::deferred(d).into_box_error()),
            FailureClass::RetryAfter(d)
        );
        assert_eq!(
            class(JobError::fatal("x").into_box_error()),
            FailureClass::Fatal
        );
        assert_eq!(
            class(JobError::retryable("x").into_box_error()),
            FailureClass::Transient
        );
        assert_eq!(
            class(Box::new(tower::timeout::error::Elapsed::new())),
            FailureClass::Transient
        );
        assert_eq!(
            class(Box::new(tower::load_shed::error::Overloaded::new())),
            FailureClass::RetryAfter(OVERLOADED_WAIT)
        );
        assert_eq!(class("anything".into()), FailureClass::Transient);
    }

    #[test]
    fn sources_are_searched() {
        let wrapped: BoxError = Box::new(Context::new(
            "outer",
            JobError::fatal("inner").into_box_error(),
        ));
        assert_eq!(class(wrapped), FailureClass::Fatal);
    }

    #[test]
    fn a_retryable_wrapper_wins_over_a_fatal_cause() {
        // The handler's explicit intent is the outermost marker.
        let inner = JobError::fatal("db").into_box_error();
        let outer = JobError::Retryable(inner).into_box_error();
        assert_eq!(class(outer), FailureClass::Transient);
    }

    #[test]
    fn chains_read_naturally() {
        let e: BoxError = Box::new(Context::new(
            "attempts exhausted (3 of 3)",
            JobError::fatal(std::io::Error::other("disk full")).into_box_error(),
        ));
        assert_eq!(
            error_chain(&*e),
            "attempts exhausted (3 of 3): fatal: disk full"
        );
        let e = JobError::retryable(std::io::Error::other("reset")).into_box_error();
        assert_eq!(error_chain(&*e), "reset");
    }
}
