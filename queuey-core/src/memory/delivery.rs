//! A delivery from the memory backend.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, ready};

use super::{DeadLetter, HoldKind, Shared};
use crate::{BackendError, BackendErrorKind, Delivery, Envelope, Error};

/// A delivered job from a [`MemoryBackend`](super::MemoryBackend).
///
/// Dropping it unsettled puts the message back in its place on the queue,
/// marked redelivered, as a broker does when a consumer goes away.
pub struct MemoryDelivery {
    pub(super) shared: Arc<Shared>,
    pub(super) queue: Arc<str>,
    pub(super) tag: u64,
    pub(super) envelope: Envelope,
    pub(super) redelivered: bool,
    pub(super) settled: bool,
}

impl MemoryDelivery {
    /// Runs `publish`, then acknowledges the delivery; if `publish` fails,
    /// the delivery is dropped unsettled and goes back on its queue.
    fn settle_after(
        mut self,
        publish: impl FnOnce(&Shared) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let shared = Arc::clone(&self.shared);
        let mut state = shared.lock();
        if state.closed {
            return Err(Error::ShutDown);
        }
        drop(state);
        // Publishing first: if it fails, the delivery is dropped unsettled
        // below and goes back on the queue.
        publish(&shared)?;
        state = shared.lock();
        match state.settle(&self.queue, self.tag) {
            Some(_) => {
                self.settled = true;
                drop(state);
                shared.notify.notify_waiters();
                Ok(())
            }
            None => Err(Error::Backend(BackendError::new(
                BackendErrorKind::NotSettled,
                format!(
                    "delivery {} on `{}` was already settled",
                    self.tag, self.queue
                ),
            ))),
        }
    }
}

impl Delivery for MemoryDelivery {
    fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    fn redelivered(&self) -> bool {
        self.redelivered
    }

    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(ready((*self).settle_after(|_| Ok(()))))
    }

    fn retry(
        self: Box<Self>,
        next: Envelope,
        delay: Duration,
    ) -> BoxFuture<'static, Result<(), Error>> {
        let next = next.for_queue(&self.queue);
        Box::pin(ready(
            self.settle_after(|s| s.hold(&next, delay, HoldKind::Retry)),
        ))
    }

    fn defer(
        self: Box<Self>,
        next: Envelope,
        delay: Duration,
    ) -> BoxFuture<'static, Result<(), Error>> {
        let next = next.for_queue(&self.queue);
        Box::pin(ready(
            self.settle_after(|s| s.hold(&next, delay, HoldKind::Deferral)),
        ))
    }

    fn dead_letter(self: Box<Self>, reason: String) -> BoxFuture<'static, Result<(), Error>> {
        let letter = self.envelope.encode().map(|body| DeadLetter {
            reason,
            original_queue: self.queue.to_string(),
            attempts: self.envelope.attempt,
            body,
        });
        Box::pin(ready(match letter {
            Ok(letter) => (*self).settle_after(|s| {
                s.store_dead_letter(letter);
                Ok(())
            }),
            Err(source) => Err(Error::Encode {
                queue: self.queue.to_string(),
                source,
            }),
        }))
    }

    fn nack_requeue(mut self: Box<Self>) -> BoxFuture<'static, Result<(), Error>> {
        let mut state = self.shared.lock();
        let result = if state.closed {
            Err(Error::ShutDown)
        } else {
            state.requeue(&self.queue, self.tag);
            Ok(())
        };
        drop(state);
        self.settled = true;
        self.shared.notify.notify_waiters();
        Box::pin(ready(result))
    }
}

impl Drop for MemoryDelivery {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut state = self.shared.lock();
        state.requeue(&self.queue, self.tag);
        drop(state);
        self.shared.notify.notify_waiters();
    }
}

impl fmt::Debug for MemoryDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryDelivery")
            .field("queue", &self.queue)
            .field("tag", &self.tag)
            .field("envelope", &self.envelope)
            .field("redelivered", &self.redelivered)
            .finish()
    }
}
