//! A delivery from the memory backend.

use std::fmt;
use std::sync::Arc;

use futures::future::{BoxFuture, ready};

use super::{Broker, DeadLetter, Settlement};
use crate::backend::{Delivery, Plan};
use crate::{BackendError, BackendErrorKind, Disposition, Envelope, Error};

/// A delivered job from a [`MemoryBackend`](super::MemoryBackend).
///
/// Dropping it unsettled puts the message back in its place on the queue,
/// marked redelivered, as a broker does when a consumer goes away.
pub struct MemoryDelivery {
    pub(super) shared: Arc<Broker>,
    pub(super) queue: Arc<str>,
    pub(super) tag: u64,
    pub(super) envelope: Envelope,
    pub(super) redelivered: bool,
    pub(super) settled: bool,
}

impl MemoryDelivery {
    /// Runs `publish`, then acknowledges the delivery and records
    /// `settlement`.
    fn settle_after(
        mut self,
        publish: impl FnOnce(&Broker) -> Result<(), Error>,
        settlement: Option<Settlement>,
    ) -> Result<(), Error> {
        let shared = Arc::clone(&self.shared);
        drop(shared.open()?);
        // Publishing first: if it fails, the delivery is dropped unsettled
        // below and goes back on the queue.
        publish(&shared)?;
        let mut state = shared.lock();
        match state.settle(&self.queue, self.tag) {
            Some(_) => {
                self.settled = true;
                drop(state);
                // Recorded before waking anyone: whoever wakes finds it.
                if let Some(settlement) = settlement {
                    shared.journal.record(settlement);
                }
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

    fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        Some(&mut self.envelope)
    }

    fn settle(self: Box<Self>, disposition: Disposition) -> BoxFuture<'static, Result<(), Error>> {
        let settlement = self.shared.journal.is_recording().then(|| {
            Settlement::new(
                &self.envelope,
                &self.queue,
                disposition.clone().never_early(),
            )
        });
        let result = match disposition.plan(&self.envelope, &self.queue) {
            Plan::Ack => self.settle_after(|_| Ok(()), settlement),
            Plan::Hold { next, delay, kind } => {
                self.settle_after(|s| s.hold(&next, delay, kind), settlement)
            }
            Plan::DeadLetter { reason } => self.dead_letter(reason, settlement),
            Plan::Requeue => self.requeue(settlement),
        };
        Box::pin(ready(result))
    }
}

impl MemoryDelivery {
    fn dead_letter(self, reason: String, settlement: Option<Settlement>) -> Result<(), Error> {
        let body = self.envelope.encode().map_err(|source| Error::Encode {
            queue: self.queue.to_string(),
            source,
        })?;
        let letter = DeadLetter {
            reason,
            original_queue: self.queue.to_string(),
            attempts: self.envelope.attempt,
            died_at_ms: crate::clock::now_ms(),
            parse_error: None,
            body,
        };
        let store = |s: &Broker| {
            s.store_dead_letter(letter);
            Ok(())
        };
        self.settle_after(store, settlement)
    }

    fn requeue(mut self, settlement: Option<Settlement>) -> Result<(), Error> {
        let result = self
            .shared
            .open()
            .map(|mut state| state.requeue(&self.queue, self.tag));
        if let (Ok(()), Some(settlement)) = (&result, settlement) {
            self.shared.journal.record(settlement);
        }
        self.settled = true;
        self.shared.notify.notify_waiters();
        result
    }
}

impl Drop for MemoryDelivery {
    fn drop(&mut self) {
        if !self.settled {
            self.shared.lock().requeue(&self.queue, self.tag);
            self.shared.notify.notify_waiters();
        }
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
