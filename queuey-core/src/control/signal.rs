//! The signal that tells a running job it was cancelled.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Tells a running handler that its job was cancelled; the handler decides
/// whether to finish, stop at a safe point or ignore it (nothing is killed).
/// Unless it completes the job, the job is dead-lettered with the reason
/// [`CANCELLED_REASON`](super::CANCELLED_REASON).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queuey_core::control::CancelSignal;
///
/// let (signal, cancel) = CancelSignal::new();
/// assert!(!signal.is_cancelled());
/// cancel.cancel();
/// signal.cancelled().await;
/// assert!(signal.is_cancelled());
/// # }
/// ```
#[derive(Clone, Default)]
pub struct CancelSignal {
    inner: Option<Arc<Inner>>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    notify: Notify,
}

/// The sending side of a [`CancelSignal`].
#[derive(Clone)]
pub struct Canceller {
    inner: Arc<Inner>,
}

impl CancelSignal {
    /// A signal and the canceller that trips it.
    pub fn new() -> (CancelSignal, Canceller) {
        let inner = Arc::new(Inner::default());
        (
            CancelSignal {
                inner: Some(Arc::clone(&inner)),
            },
            Canceller { inner },
        )
    }

    /// A signal that never trips (the default).
    pub fn never() -> CancelSignal {
        CancelSignal { inner: None }
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|inner| inner.cancelled.load(Ordering::Acquire))
    }

    /// Resolves once the job is cancelled; never, for a job that is not.
    pub async fn cancelled(&self) {
        let Some(inner) = &self.inner else {
            return std::future::pending().await;
        };
        loop {
            let notified = inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if inner.cancelled.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

impl Canceller {
    /// Trips the signal. Returns `false` if it was tripped already.
    pub fn cancel(&self) -> bool {
        let first = !self.inner.cancelled.swap(true, Ordering::AcqRel);
        if first {
            self.inner.notify.notify_waiters();
        }
        first
    }

    /// Whether the signal was tripped.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }
}

/// Two signals are equal whatever their state: a job's context is equal to
/// another by its bookkeeping, not by its signal.
impl PartialEq for CancelSignal {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CancelSignal {}

impl fmt::Debug for CancelSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelSignal")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl fmt::Debug for Canceller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Canceller")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_waiting_handler_wakes_on_cancel() {
        let (signal, cancel) = CancelSignal::new();
        let waiting = tokio::spawn({
            let signal = signal.clone();
            async move { signal.cancelled().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert!(cancel.cancel());
        assert!(!cancel.cancel());
        waiting.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_never_signal_never_trips() {
        let never = CancelSignal::never();
        let timed = tokio::time::timeout(std::time::Duration::from_secs(3600), never.cancelled());
        assert!(timed.await.is_err());
        assert!(!never.is_cancelled());
    }
}
