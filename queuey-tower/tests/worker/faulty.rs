//! A backend that refuses chosen settles, to test what the worker does when
//! the broker says no.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use queuey_core::{
    Backend, BackendError, BackendErrorKind, Delivery, DeliveryStream, Envelope, Error,
    MemoryBackend, QueueConfig,
};

/// The memory backend, except that the next `fail_retries` retries are
/// refused as a broker would refuse a hold publish (the delivery is dropped
/// unsettled, so the memory backend delivers it again).
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultyBackend {
    pub(crate) inner: Arc<MemoryBackend>,
    pub(crate) fail_retries: Arc<AtomicU32>,
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
        let fail_retries = Arc::clone(&self.fail_retries);
        Box::pin(async move {
            let stream = self.inner.consume(queue).await?;
            Ok(stream
                .map(move |item| {
                    item.map(|inner| {
                        Box::new(FaultyDelivery {
                            inner,
                            fail_retries: Arc::clone(&fail_retries),
                        }) as Box<dyn Delivery>
                    })
                })
                .boxed())
        })
    }
}

#[derive(Debug)]
struct FaultyDelivery {
    inner: Box<dyn Delivery>,
    fail_retries: Arc<AtomicU32>,
}

impl Delivery for FaultyDelivery {
    fn envelope(&self) -> &Envelope {
        self.inner.envelope()
    }

    fn redelivered(&self) -> bool {
        self.inner.redelivered()
    }

    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), Error>> {
        self.inner.ack()
    }

    fn retry(
        self: Box<Self>,
        next: Envelope,
        delay: Duration,
    ) -> BoxFuture<'static, Result<(), Error>> {
        let refuse = self
            .fail_retries
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refuse {
            drop(self);
            return Box::pin(async {
                Err(Error::Backend(BackendError::new(
                    BackendErrorKind::Refused,
                    "PRECONDITION_FAILED on the hold queue (injected)",
                )))
            });
        }
        self.inner.retry(next, delay)
    }

    fn defer(
        self: Box<Self>,
        next: Envelope,
        delay: Duration,
    ) -> BoxFuture<'static, Result<(), Error>> {
        self.inner.defer(next, delay)
    }

    fn dead_letter(self: Box<Self>, reason: String) -> BoxFuture<'static, Result<(), Error>> {
        self.inner.dead_letter(reason)
    }

    fn nack_requeue(self: Box<Self>) -> BoxFuture<'static, Result<(), Error>> {
        self.inner.nack_requeue()
    }
}
