//! Carrying out a disposition on the broker.

use queuey_core::{BoxError, Delivery, Error};

use crate::Disposition;
use crate::classify::error_chain;

/// Settles a delivery according to its stack's answer. An error that reached
/// the worker is dead-lettered, never dropped.
pub(crate) async fn settle(
    delivery: Box<dyn Delivery>,
    outcome: Result<Disposition, BoxError>,
    top_priority: u8,
) -> Result<&'static str, Error> {
    match outcome {
        Ok(Disposition::Ack) => delivery.ack().await.map(|()| "ack"),
        Ok(Disposition::Retry { delay }) => {
            let next = delivery.envelope().next_attempt();
            delivery.retry(next, delay).await.map(|()| "retry")
        }
        Ok(Disposition::Defer { delay }) => {
            let next = delivery.envelope().deferred(top_priority);
            delivery.defer(next, delay).await.map(|()| "defer")
        }
        Ok(Disposition::DeadLetter { reason }) => {
            delivery.dead_letter(reason).await.map(|()| "dead_letter")
        }
        Err(error) => delivery
            .dead_letter(error_chain(&*error))
            .await
            .map(|()| "dead_letter"),
    }
}
