//! The memory backend's consumer stream.

use std::sync::Arc;

use futures::StreamExt;
use tokio::time::Instant;

use super::delivery::MemoryDelivery;
use super::{Broker, DeadLetter};
use crate::backend::{Delivery, DeliveryStream, MALFORMED_ENVELOPE_REASON};
use crate::{Envelope, Error};

/// One consumer; unregisters itself when the stream is dropped.
struct Consumer {
    shared: Arc<Broker>,
    queue: Arc<str>,
    id: u64,
    prefetch: usize,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.lock().consumers.remove(&self.id);
    }
}

pub(super) fn stream(shared: Arc<Broker>, queue: Arc<str>, prefetch: usize) -> DeliveryStream {
    let id = {
        let mut state = shared.lock();
        let id = state.next_seq();
        state.consumers.insert(id, 0);
        id
    };
    let consumer = Consumer {
        shared,
        queue,
        id,
        prefetch,
    };
    futures::stream::unfold(consumer, |consumer| async move {
        let item = next(&consumer).await?;
        Some((item, consumer))
    })
    .boxed()
}

async fn next(consumer: &Consumer) -> Option<Result<Box<dyn Delivery>, Error>> {
    let shared = &consumer.shared;
    loop {
        let notified = shared.notify.notified();
        tokio::pin!(notified);
        // Registered before looking, so a change in between wakes us.
        notified.as_mut().enable();
        let due = {
            let mut state = shared.lock();
            if state.closed {
                return None;
            }
            let now = Instant::now();
            state.release_due(now);
            match state.take(&consumer.queue, consumer.id, consumer.prefetch, now) {
                Some(taken) => {
                    drop(state);
                    match Envelope::decode(&taken.message.body) {
                        Ok(mut envelope) => {
                            envelope.reply_to = taken.message.reply_to.clone();
                            return Some(Ok(Box::new(MemoryDelivery {
                                shared: Arc::clone(shared),
                                queue: Arc::clone(&consumer.queue),
                                tag: taken.tag,
                                envelope,
                                redelivered: taken.message.redelivered,
                                settled: false,
                            })));
                        }
                        Err(error) => {
                            tracing::warn!(
                                queue = %consumer.queue,
                                %error,
                                "dead-lettering a message whose body is not a job envelope"
                            );
                            shared.lock().settle(&consumer.queue, taken.tag);
                            shared.store_dead_letter(DeadLetter {
                                reason: MALFORMED_ENVELOPE_REASON.to_owned(),
                                original_queue: consumer.queue.to_string(),
                                attempts: 0,
                                died_at_ms: crate::clock::now_ms(),
                                parse_error: Some(error.to_string()),
                                body: taken.message.body.to_vec(),
                            });
                            continue;
                        }
                    }
                }
                None => state.next_due(),
            }
        };
        match due {
            Some(due) => {
                tokio::select! {
                    () = &mut notified => {}
                    () = tokio::time::sleep_until(due) => {}
                }
            }
            None => notified.await,
        }
    }
}
