//! A backend that fails on command, to test what the worker does when the
//! broker says no or the connection goes away.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use queuey_core::backend::{Backend, Capabilities, ConnectionState, Delivery, DeliveryStream};
use queuey_core::memory::MemoryBackend;
use queuey_core::{BackendError, BackendErrorKind, Disposition, Envelope, Error, QueueConfig};
use tokio::sync::watch;

/// The memory backend, with faults:
///
/// - the next `fail_retries` retries are refused as a broker would refuse a
///   hold publish (the delivery is dropped unsettled, so the memory backend
///   delivers it again);
/// - [`cut`](Self::cut) drops the "connection": every consumer stream
///   yields a transient error and ends, and deliveries taken before it fail
///   to settle with `NotSettled` (and go back to the queue);
/// - the next `fail_consumes` consumes fail transiently, and
///   `refuse_consumes` makes them fail for good;
/// - [`set_state`](Self::set_state) sets what `connection_state` reports.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultyBackend {
    pub(crate) inner: Arc<MemoryBackend>,
    pub(crate) fail_retries: Arc<AtomicU32>,
    pub(crate) fail_consumes: Arc<AtomicU32>,
    pub(crate) refuse_consumes: Arc<AtomicU32>,
    pub(crate) consumes: Arc<AtomicU64>,
    /// Deliveries handed back with `Disposition::Requeue`.
    pub(crate) requeues: Arc<AtomicU64>,
    connection: Arc<Connection>,
}

#[derive(Debug)]
struct Connection {
    generation: watch::Sender<u64>,
    state: watch::Sender<ConnectionState>,
}

impl Default for Connection {
    fn default() -> Self {
        Connection {
            generation: watch::channel(0).0,
            state: watch::channel(ConnectionState::Connected).0,
        }
    }
}

fn lost() -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::ConnectionLost,
        "connection reset by peer (injected)",
    ))
}

fn take_one(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl FaultyBackend {
    /// Drops the connection: consumers fail, deliveries taken so far are
    /// stale.
    pub(crate) fn cut(&self) {
        self.connection.generation.send_modify(|g| *g += 1);
    }

    /// Sets what `connection_state` reports.
    pub(crate) fn set_state(&self, state: ConnectionState) {
        self.connection.state.send_replace(state);
    }
}

impl Backend for FaultyBackend {
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.declare(queues)
    }

    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.publish(envelope)
    }

    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.publish_after(envelope, delay)
    }

    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        self.inner.defer(envelope, delay)
    }

    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>> {
        Box::pin(async move {
            self.consumes.fetch_add(1, Ordering::SeqCst);
            if self.refuse_consumes.load(Ordering::SeqCst) > 0 {
                return Err(Error::Backend(BackendError::new(
                    BackendErrorKind::Refused,
                    "ACCESS_REFUSED (injected)",
                )));
            }
            if take_one(&self.fail_consumes) {
                return Err(lost());
            }
            let stream = self.inner.consume(queue).await?;
            let mut cut = self.connection.generation.subscribe();
            let generation = *cut.borrow_and_update();
            let fail_retries = Arc::clone(&self.fail_retries);
            let requeues = Arc::clone(&self.requeues);
            let connection = Arc::clone(&self.connection);
            // Until the connection is cut; then one error, and the end.
            let until_cut = futures::stream::unfold(
                (stream, cut, false),
                |(mut stream, mut cut, done)| async move {
                    if done {
                        return None;
                    }
                    tokio::select! {
                        biased;
                        _ = cut.changed() => Some((Err(lost()), (stream, cut, true))),
                        item = stream.next() => item.map(|item| (item, (stream, cut, false))),
                    }
                },
            );
            Ok(until_cut
                .map(move |item| {
                    item.map(|inner| {
                        Box::new(FaultyDelivery {
                            inner,
                            generation,
                            connection: Arc::clone(&connection),
                            fail_retries: Arc::clone(&fail_retries),
                            requeues: Arc::clone(&requeues),
                        }) as Box<dyn Delivery>
                    })
                })
                .boxed())
        })
    }

    fn connection_state(&self) -> ConnectionState {
        *self.connection.state.borrow()
    }

    fn connection_changed(&self, seen: ConnectionState) -> BoxFuture<'_, ConnectionState> {
        let mut state = self.connection.state.subscribe();
        Box::pin(async move {
            *state
                .wait_for(|now| *now != seen)
                .await
                .expect("the backend holds the sender")
        })
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
    }
}

#[derive(Debug)]
struct FaultyDelivery {
    inner: Box<dyn Delivery>,
    generation: u64,
    connection: Arc<Connection>,
    fail_retries: Arc<AtomicU32>,
    requeues: Arc<AtomicU64>,
}

impl Delivery for FaultyDelivery {
    fn envelope(&self) -> &Envelope {
        self.inner.envelope()
    }

    fn redelivered(&self) -> bool {
        self.inner.redelivered()
    }

    fn settle(self: Box<Self>, disposition: Disposition) -> BoxFuture<'static, Result<(), Error>> {
        if *self.connection.generation.borrow() != self.generation {
            // Dropped unsettled: the memory backend delivers it again.
            drop(self);
            return Box::pin(async {
                Err(Error::Backend(BackendError::new(
                    BackendErrorKind::NotSettled,
                    "the delivery's connection is gone (injected)",
                )))
            });
        }
        if matches!(disposition, Disposition::Retry { .. }) && take_one(&self.fail_retries) {
            drop(self);
            return Box::pin(async {
                Err(Error::Backend(BackendError::new(
                    BackendErrorKind::Refused,
                    "PRECONDITION_FAILED on the hold queue (injected)",
                )))
            });
        }
        if disposition == Disposition::Requeue {
            self.requeues.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.settle(disposition)
    }
}
