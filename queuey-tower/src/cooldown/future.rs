//! The response future of [`Cooldown`](super::Cooldown).

use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use queuey_core::BoxError;
use tokio::time::Instant;

use super::state::Cooldowns;
use crate::classifier::{Classify, FailureClass, SharedClassifier};
use queuey_core::Disposition;

pin_project! {
    /// The response future of [`Cooldown`](super::Cooldown).
    pub struct ResponseFuture<F, K> {
        #[pin]
        kind: Kind<F, K>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, K> {
        /// The job has no key: the inner answer, untouched.
        Passed { #[pin] inner: F },
        /// The job ran; a deferral (or an error the classifier calls a
        /// wait) starts a cool-down of its key.
        Keyed {
            #[pin]
            inner: F,
            key: Option<K>,
            cooldowns: Arc<Cooldowns<K>>,
            classifier: SharedClassifier,
            // Raised when a limit layer inside deferred the job.
            limit_wait: Arc<AtomicBool>,
        },
        /// The key was cooling down: deferred without running the job.
        Cooling { delay: Duration },
    }
}

impl<F, K> ResponseFuture<F, K> {
    pub(super) fn passed(inner: F) -> Self {
        ResponseFuture {
            kind: Kind::Passed { inner },
        }
    }

    pub(super) fn keyed(
        inner: F,
        key: K,
        cooldowns: Arc<Cooldowns<K>>,
        classifier: SharedClassifier,
        limit_wait: Arc<AtomicBool>,
    ) -> Self {
        ResponseFuture {
            kind: Kind::Keyed {
                inner,
                key: Some(key),
                cooldowns,
                classifier,
                limit_wait,
            },
        }
    }

    pub(super) fn cooling(delay: Duration) -> Self {
        ResponseFuture {
            kind: Kind::Cooling { delay },
        }
    }
}

impl<F, K> std::fmt::Debug for ResponseFuture<F, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, K> Future for ResponseFuture<F, K>
where
    F: Future<Output = Result<Disposition, BoxError>>,
    K: Hash + Eq,
{
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Passed { inner } => inner.poll(cx),
            KindProj::Cooling { delay } => Poll::Ready(Ok(Disposition::Defer { delay: *delay })),
            KindProj::Keyed {
                inner,
                key,
                cooldowns,
                classifier,
                limit_wait,
            } => {
                let answer = ready!(inner.poll(cx));
                // Outside the deferral layer the wait is a `Defer`; inside
                // it (a handler's own layers), still the error. A `Defer`
                // of a limit layer inside is the key's own limit, not the
                // API's answer.
                let wait = match &answer {
                    Ok(Disposition::Defer { .. }) if limit_wait.load(Ordering::Relaxed) => None,
                    Ok(Disposition::Defer { delay }) => Some(*delay),
                    Ok(_) => None,
                    Err(error) => match classifier.classify(&**error) {
                        FailureClass::RetryAfter(delay) => Some(delay),
                        FailureClass::Transient | FailureClass::Fatal => None,
                    },
                };
                if let Some(wait) = wait
                    && let Some(key) = key.take()
                {
                    cooldowns.cool(key, Instant::now(), wait);
                }
                Poll::Ready(answer)
            }
        }
    }
}
