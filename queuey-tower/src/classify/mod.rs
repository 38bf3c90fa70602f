//! Classifying errors into what should happen next.
//!
//! A stack's errors are `BoxError`s of any type (a handler's
//! [`JobError`](queuey_core::JobError), tower's `Elapsed` or `Overloaded`, a
//! client library's error). Their meaning is decided **once per stack**, as
//! tower-http's response classifiers do: the request carries one [`Classify`]
//! ([`JobRequest::classifier`]) that the retry, deferral and dead-letter
//! layers and the worker all ask:
//!
//! - [`FailureClass::RetryAfter`]: not a failure; defer the job
//!   ([`DeferOn429`](struct@crate::defer::DeferOn429), else
//!   [`DeadLetterLayer`](crate::dead_letter::DeadLetterLayer) or the worker);
//! - [`FailureClass::Transient`]: retry while attempts are left
//!   ([`RetryLayer`](struct@crate::retry::RetryLayer));
//! - [`FailureClass::Fatal`]: give up at once.
//!
//! Set it for a worker with
//! [`WorkerBuilder::classifier`](crate::WorkerBuilder::classifier), or for
//! one stack with a [`ClassifyLayer`] outside the layers that read it.
//!
//! # Precedence
//!
//! Every layer and the worker decide in one order:
//!
//! 1. **queuey's own intent errors**, walking the chain from the outside in:
//!    [`DeferralLimitReached`] is transient, [`FatalError`]
//!    (`JobError::fatal`) fatal, [`DeferredError`] (`JobError::deferred`) a
//!    wait. The walk stops at a [`RetryableError`] (`JobError::retryable`,
//!    or `?`), whose cause the next steps classify;
//! 2. **your classifier**, if the worker or a [`ClassifyLayer`] set one;
//! 3. **the defaults**: tower's `Overloaded` is a wait of
//!    [`OVERLOADED_WAIT`], anything else transient.
//!
//! So your classifier never overrides queuey: a job deferred as often as
//! [`DeferOn429::max_deferrals`](crate::defer::DeferOn429::max_deferrals)
//! allows fails transiently, even if your classifier calls its 429 a wait.
//!
//! [`DefaultClassifier`] is that order without yours. Any
//! `Fn(&(dyn Error + 'static)) -> Option<FailureClass>` is a classifier,
//! asked about the error and each source; `None` for all leaves it to the
//! defaults:
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
