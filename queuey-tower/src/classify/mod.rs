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
//!   ([`DeferOn429`](struct@crate::defer::DeferOn429) acts on it, and so do
//!   [`DeadLetterLayer`](crate::dead_letter::DeadLetterLayer) and the worker when no
//!   deferral layer did);
//! - [`FailureClass::Transient`]: retry while attempts are left
//!   ([`RetryLayer`](struct@crate::retry::RetryLayer) acts on it);
//! - [`FailureClass::Fatal`]: give up at once.
//!
//! Set it for a whole worker with
//! [`WorkerBuilder::classifier`](crate::WorkerBuilder::classifier), or for
//! one stack with a [`ClassifyLayer`] outside the layers that read it.
//!
//! # Precedence
//!
//! Every layer and the worker classify through the same function, which
//! decides in one order:
//!
//! 1. **queuey's own intent errors**, found walking the error's chain from
//!    the outside in: a [`DeferralLimitReached`] (the deferral layer's decision to
//!    stop deferring) is transient, a [`FatalError`] (`JobError::fatal`) is
//!    fatal, a [`DeferredError`] (`JobError::deferred`) is a wait. The search
//!    stops at a [`RetryableError`] (`JobError::retryable`, or `?`): what it
//!    wraps is the cause, which the next steps classify;
//! 2. **your classifier**, if the worker or a [`ClassifyLayer`] set one;
//! 3. **the defaults**: tower's `Overloaded` (a load shed) is a wait of
//!    [`OVERLOADED_WAIT`], everything else (a `RetryableError`, tower's
//!    `Elapsed`, a panic, any other error) is transient.
//!
//! So a classifier of yours never overrides what queuey decided itself: a
//! job deferred as often as [`DeferOn429::max_deferrals`](crate::defer::DeferOn429::max_deferrals)
//! allows fails transiently and spends an attempt, even when your
//! classifier calls the 429 inside it a wait.
//!
//! [`DefaultClassifier`] is that order with no classifier of yours. Any
//! `Fn(&(dyn Error + 'static)) -> Option<FailureClass>` is a classifier too:
//! it is asked about the error and each of its sources, and the defaults
//! decide when it answers `None` for all of them:
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

#[cfg(doc)]
use crate::JobRequest;
#[cfg(doc)]
use queuey_core::{DeferredError, FatalError, RetryableError};

pub use crate::classifier::{
    Classify, DefaultClassifier, DeferralLimitReached, FailureClass, OVERLOADED_WAIT,
    SharedClassifier, parse_retry_after, parse_retry_after_at,
};
pub use layer::{ClassifyLayer, Classifying};
