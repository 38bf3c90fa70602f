//! Retiring a consumer whose stream was dropped (a worker pausing the
//! queue, or shutting down): cancelled, then every delivery it had
//! received but not handed out handed back as a new message, so that none
//! comes back marked redelivered and the poison guard counts nothing.
//!
//! Deliveries handed out already belong to whoever holds them: they are
//! settled (or dropped) on their own, and keep the channel open until
//! then. Without a runtime to run on (the process is exiting), nothing is
//! done and the broker requeues the consumer's deliveries when its channel
//! closes, marked redelivered. Closing the backend waits (within the call
//! bound) for the retirements under way ([`Retirements`](super::retirements::Retirements)), so a worker
//! that stops and then closes its backend hands everything back first.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use queuey_core::Error;

use super::Consumer;
use super::delivery::RabbitMqDelivery;

impl Drop for Consumer {
    fn drop(&mut self) {
        // A stream that ended has nothing to hand back, and the consumer
        // being retired is marked ended: should its task be dropped unrun
        // (the runtime shutting down), it is not retired again.
        if self.ended {
            return;
        }
        let parked = self.parked.take();
        let live = self.live.take();
        if live.is_none() && parked.is_none() {
            return;
        }
        if self.link.is_closed() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let under_way = self.retirements.begin();
        let retiring = Consumer {
            link: self.link.clone(),
            outbox: self.outbox.clone(),
            retirements: self.retirements.clone(),
            config: self.config.clone(),
            queue: self.queue.clone(),
            source: self.source.clone(),
            consumed: self.consumed.clone(),
            live,
            ended: true,
            pause: self.pause,
            gate: self.gate.clone(),
            parked: None,
        };
        runtime.spawn(async move {
            retiring.retire(parked).await;
            drop(under_way);
        });
    }
}

impl Consumer {
    /// Cancels the consumer, hands back the delivery that was on its way to
    /// the worker and every one still buffered, then lets the channel go.
    async fn retire(mut self, parked: Option<Box<RabbitMqDelivery>>) {
        let mut handing_back = FuturesUnordered::new();
        if let Some(delivery) = parked {
            handing_back.push(hand_back(delivery));
        }
        if let Some(mut live) = self.live.take() {
            let bound = self.outbox.options().call_timeout;
            match live.cancel(bound).await {
                Ok(()) => {
                    while let Some((delivery, acks)) = live.buffered(bound).await {
                        if let Some(delivery) = self.dispatch(delivery, acks).await {
                            handing_back.push(hand_back(delivery));
                        }
                    }
                }
                Err(error) => {
                    tracing::debug!(queue = %self.consumed, %error, "could not cancel the consumer of a dropped stream; the broker hands back its deliveries when the channel closes");
                }
            }
        }
        let mut handed = 0usize;
        while let Some(result) = handing_back.next().await {
            match result {
                Ok(()) => handed += 1,
                Err(error) => {
                    tracing::warn!(queue = %self.consumed, %error, "could not hand back a delivery of a dropped stream; the broker delivers it again")
                }
            }
        }
        tracing::debug!(queue = %self.consumed, handed_back = handed, "retired the consumer of a dropped stream");
    }
}

/// Hands a delivery back, as a boxed future like the others.
fn hand_back(delivery: Box<RabbitMqDelivery>) -> BoxFuture<'static, Result<(), Error>> {
    Box::pin(async move { delivery.hand_back_now().await })
}
