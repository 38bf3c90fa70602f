//! The classification itself: what an error means for the job that failed
//! with it. [`classify`](crate::classify) is its public face, with the
//! layer that sets a stack's classifier.

mod deferral_limit;
mod retry_after;
mod shared;

use std::error::Error as StdError;
use std::time::Duration;

use queuey_core::{DeferredError, FatalError, RetryableError};

pub use deferral_limit::DeferralLimitReached;
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

/// Decides what an error means. One instance, behind an `Arc`, serves a
/// whole stack, so it needs no `Clone`. It is asked only about errors that
/// carry none of queuey's intent errors (see
/// [Precedence](crate::classify#precedence)).
pub trait Classify: Send + Sync + 'static {
    /// Classifies one error.
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass;
}

/// queuey's own classification: the [precedence](crate::classify#precedence) with no
/// classifier of yours.
///
/// | error (the outermost one recognised decides) | class |
/// |---|---|
/// | [`DeferralLimitReached`] (from [`DeferOn429`](struct@crate::defer::DeferOn429)) | `Transient` |
/// | [`FatalError`] (from `JobError::fatal`) | `Fatal` |
/// | [`DeferredError`] (from `JobError::deferred`) | `RetryAfter(delay)` |
/// | [`RetryableError`] (from `JobError::retryable` or `?`) | `Transient` |
/// | `tower::load_shed::error::Overloaded` | `RetryAfter(`[`OVERLOADED_WAIT`]`)` |
/// | `tower::timeout::error::Elapsed` | `Transient` |
/// | anything else | `Transient` |
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultClassifier;

impl Classify for DefaultClassifier {
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass {
        class_of(error, |_| None)
    }
}

/// A closure asked about the error, then each source (so it sees a client
/// error wrapped in `JobError::retryable`); the first answer wins, else the
/// defaults decide.
impl<F> Classify for F
where
    F: Fn(&(dyn StdError + 'static)) -> Option<FailureClass> + Send + Sync + 'static,
{
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass {
        class_of(error, |error| chain(error).find_map(self))
    }
}

/// The one order every classification (every layer and the worker, through
/// [`SharedClassifier`]) follows: intent errors, `custom`, the defaults.
pub(crate) fn class_of(
    error: &(dyn StdError + 'static),
    custom: impl FnOnce(&(dyn StdError + 'static)) -> Option<FailureClass>,
) -> FailureClass {
    intent(error)
        .or_else(|| custom(error))
        .unwrap_or_else(|| defaults(error))
}

/// The error and its sources, outermost first.
fn chain<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |&e| e.source())
}

/// What queuey's own intent errors say, if the chain carries one before a
/// [`RetryableError`] (whose cause is for the classifiers to judge).
fn intent(error: &(dyn StdError + 'static)) -> Option<FailureClass> {
    for e in chain(error) {
        if e.is::<DeferralLimitReached>() {
            return Some(FailureClass::Transient);
        }
        if e.is::<FatalError>() {
            return Some(FailureClass::Fatal);
        }
        if let Some(deferred) = e.downcast_ref::<DeferredError>() {
            return Some(FailureClass::RetryAfter(deferred.delay));
        }
        if e.is::<RetryableError>() {
            return None;
        }
    }
    None
}

/// What an error no intent error and no classifier decided means.
fn defaults(error: &(dyn StdError + 'static)) -> FailureClass {
    for e in chain(error) {
        if e.is::<tower::load_shed::error::Overloaded>() {
            return FailureClass::RetryAfter(OVERLOADED_WAIT);
        }
        if e.is::<RetryableError>() || e.is::<tower::timeout::error::Elapsed>() {
            return FailureClass::Transient;
        }
    }
    FailureClass::Transient
}

/// What an error no layer turned into a disposition becomes: a deferral for
/// a `Retry-After` (never early), else a dead letter with the error's chain
/// ([`fatal_reason`] for a fatal one).
pub(crate) fn last_resort(
    class: FailureClass,
    error: &(dyn StdError + 'static),
) -> queuey_core::Disposition {
    match class {
        FailureClass::RetryAfter(delay) => queuey_core::Disposition::Defer { delay }.never_early(),
        FailureClass::Transient => queuey_core::Disposition::DeadLetter {
            reason: error_chain(error),
        },
        FailureClass::Fatal => queuey_core::Disposition::DeadLetter {
            reason: fatal_reason(error),
        },
    }
}

/// The one spelling of a fatal dead-letter reason, whoever called it fatal:
/// `fatal: ` and the error's chain (a [`FatalError`] adds no second one).
pub(crate) fn fatal_reason(error: &(dyn StdError + 'static)) -> String {
    let chain = chain_of(chain(error).filter(|e| !e.is::<FatalError>()));
    format!("fatal: {chain}")
}

/// An error and its sources joined with `": "`, as dead-letter reasons are.
pub(crate) fn error_chain(error: &(dyn StdError + 'static)) -> String {
    chain_of(chain(error))
}

/// Joins the texts of `errors` with `": "`, leaving out a text its wrapper
/// already ends with.
fn chain_of<'a>(errors: impl Iterator<Item = &'a (dyn StdError + 'static)>) -> String {
    let mut text = String::new();
    for e in errors {
        let next = e.to_string();
        if text.is_empty() {
            text = next;
        } else if !text.ends_with(&next) {
            // Wrappers that display as their source would repeat it.
            text.push_str(": ");
            text.push_str(&next);
        }
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

    /// A client's 429, which a handler returned with `?`.
    #[derive(Debug)]
    struct TooManyRequests;

    impl fmt::Display for TooManyRequests {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("HTTP 429")
        }
    }

    impl StdError for TooManyRequests {}

    fn calls_429_a_wait(e: &(dyn StdError + 'static)) -> Option<FailureClass> {
        e.is::<TooManyRequests>()
            .then_some(FailureClass::RetryAfter(Duration::from_millis(20)))
    }

    /// Says every error is a wait, whatever it is.
    struct EverythingWaits;

    impl Classify for EverythingWaits {
        fn classify(&self, _: &(dyn StdError + 'static)) -> FailureClass {
            FailureClass::RetryAfter(Duration::from_secs(1))
        }
    }

    fn limit_reached() -> BoxError {
        let the_429 = JobError::retryable(TooManyRequests).into_box_error();
        Box::new(DeferralLimitReached::new(3, 3, the_429))
    }

    #[test]
    fn queuey_intent_errors_come_before_a_classifier_of_yours() {
        let closure = SharedClassifier::new(calls_429_a_wait);
        let custom = SharedClassifier::new(EverythingWaits);
        for classifier in [&closure, &custom] {
            assert_eq!(
                classifier.classify(&*limit_reached()),
                FailureClass::Transient,
                "{classifier:?}"
            );
            let fatal = JobError::fatal(TooManyRequests).into_box_error();
            assert_eq!(classifier.classify(&*fatal), FailureClass::Fatal);
            let deferred = JobError::deferred(Duration::from_secs(9)).into_box_error();
            assert_eq!(
                classifier.classify(&*deferred),
                FailureClass::RetryAfter(Duration::from_secs(9))
            );
        }
        // A closure used on its own keeps the same order.
        assert_eq!(
            calls_429_a_wait.classify(&*limit_reached()),
            FailureClass::Transient
        );
    }

    #[test]
    fn a_classifier_of_yours_sees_through_a_retryable_wrapper_then_the_defaults_decide() {
        let classifier = SharedClassifier::new(calls_429_a_wait);
        let the_429 = JobError::retryable(TooManyRequests).into_box_error();
        assert_eq!(
            classifier.classify(&*the_429),
            FailureClass::RetryAfter(Duration::from_millis(20))
        );
        let other = JobError::retryable("reset").into_box_error();
        assert_eq!(classifier.classify(&*other), FailureClass::Transient);
        let shed: BoxError = Box::new(tower::load_shed::error::Overloaded::new());
        assert_eq!(
            classifier.classify(&*shed),
            FailureClass::RetryAfter(OVERLOADED_WAIT)
        );
        // A wrapper of the user's around a fatal error: queuey's intent wins.
        let wrapped: BoxError = Box::new(Context::new(
            "calling the API",
            JobError::fatal(TooManyRequests).into_box_error(),
        ));
        assert_eq!(classifier.classify(&*wrapped), FailureClass::Fatal);
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

    #[test]
    fn a_fatal_failure_reads_the_same_whoever_called_it_fatal() {
        let calls_429_fatal = SharedClassifier::new(|e: &(dyn StdError + 'static)| {
            e.is::<TooManyRequests>().then_some(FailureClass::Fatal)
        });
        let reason = |error: BoxError| match last_resort(calls_429_fatal.classify(&*error), &*error)
        {
            queuey_core::Disposition::DeadLetter { reason } => reason,
            other => panic!("{other:?}"),
        };
        // The handler's own word, and the classifier's.
        assert_eq!(
            reason(JobError::fatal(TooManyRequests).into_box_error()),
            "fatal: HTTP 429"
        );
        assert_eq!(reason(Box::new(TooManyRequests)), "fatal: HTTP 429");
        assert_eq!(
            reason(JobError::retryable(TooManyRequests).into_box_error()),
            "fatal: HTTP 429"
        );
        // Wrapped, the fatal marker is said once, at the front.
        let wrapped: BoxError = Box::new(Context::new(
            "calling the API",
            JobError::fatal(TooManyRequests).into_box_error(),
        ));
        assert_eq!(reason(wrapped), "fatal: calling the API: HTTP 429");
        // A transient failure that reached the end keeps its own text.
        assert_eq!(reason("reset".into()), "reset");
    }
}
