//! A consumer on one connection: starting it, and restoring it when its
//! connection dies or the broker cancels it.

use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::StreamExt;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::BasicCancelOptions;
use lapin::types::FieldTable;
use queuey_core::Error;

use super::acks::Acks;
use super::tag::consumer_tag;
use super::{Consumer, RESUME_PAUSE_MIN, Source};
use crate::error::Failure;
use crate::{declare, properties};

/// A consumer on one connection.
pub(super) struct Live {
    consumer: lapin::Consumer,
    /// The writer of the channel's acknowledgements, which holds the
    /// channel, shared with every delivery taken from it.
    acks: Acks,
    tag: String,
    generation: u64,
}

/// What one look at the consumer gave.
// Returned once and moved straight on: boxing the delivery would cost an
// allocation per delivery.
#[allow(clippy::large_enum_variant)]
pub(super) enum Received {
    /// A delivery, known to the writer of its channel's acknowledgements.
    Delivery(LapinDelivery, Acks),
    /// No consumer: it was lost and must be started again.
    Restart,
    /// The consumer failed (its connection is most likely gone).
    Lost(Option<Live>, lapin::Error),
    /// The consumer ended: the broker cancelled it, or its channel closed.
    Cancelled(Option<Live>),
}

/// How a wait for the consumer (started again, lost, cancelled) ended.
pub(super) enum Resumed {
    /// Look at the consumer again.
    Again,
    /// The stream ends, with this error or quietly.
    End(Option<Error>),
}

impl Live {
    /// Cancels the consumer and waits, up to `bound`, for the broker's
    /// `cancel-ok`; after it, nothing more arrives, and the consumer yields
    /// what it had buffered, then ends.
    pub(super) async fn cancel(&self, bound: Duration) -> Result<(), String> {
        let cancel = self
            .acks
            .channel()
            .basic_cancel(properties::short(&self.tag), BasicCancelOptions::default());
        match tokio::time::timeout(bound, cancel).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer from RabbitMQ within {bound:?}")),
        }
    }

    /// The next delivery the consumer had buffered before it was
    /// cancelled, known to the channel's writer; `None` once there is none.
    pub(super) async fn buffered(&mut self, bound: Duration) -> Option<(LapinDelivery, Acks)> {
        match tokio::time::timeout(bound, self.consumer.next()).await {
            Ok(Some(Ok(delivery))) => {
                self.acks.delivered(delivery.delivery_tag);
                Some((delivery, self.acks.clone()))
            }
            _ => None,
        }
    }
}

impl Consumer {
    /// Opens a channel on the current connection and consumes on it, within
    /// the call bound; a suspect queue is declared first.
    pub(super) async fn start(&self) -> Result<Live, Error> {
        let queue = &*self.consumed;
        let what = format!("consuming `{queue}`");
        let options = self.outbox.options();
        let prefetch = self.prefetch();
        let failing = what.as_str();
        let live = self
            .link
            .call(&what, |current| async move {
                let connection = &current.connection;
                let fail = |e: lapin::Error| {
                    Failure::of(&e, connection.status().connected()).into_error(failing)
                };
                if let Source::Suspects(name) = &self.source {
                    declare::declare_suspect_queue(connection, name, options, &self.config).await?;
                }
                let channel = connection.create_channel().await.map_err(fail)?;
                let tag = consumer_tag(queue);
                let consumer =
                    crate::channel::consume(&channel, queue, &tag, prefetch, FieldTable::default())
                        .await
                        .map_err(fail)?;
                Ok(Live {
                    acks: Acks::start(
                        channel,
                        Arc::clone(&self.consumed),
                        options.call_timeout,
                        Arc::clone(&self.retirements),
                    ),
                    consumer,
                    tag,
                    generation: current.generation,
                })
            })
            .await?;
        tracing::debug!(queue, consumer_tag = %live.tag, prefetch, "consuming");
        Ok(live)
    }

    /// Looks at the consumer without waiting: a delivery, or what must
    /// happen before the next one can come.
    pub(super) fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<Received> {
        let Some(live) = self.live.as_mut() else {
            return Poll::Ready(Received::Restart);
        };
        Poll::Ready(match ready!(live.consumer.poll_next_unpin(cx)) {
            Some(Ok(delivery)) => {
                self.pause = RESUME_PAUSE_MIN;
                // Known to the writer before anything can settle it.
                live.acks.delivered(delivery.delivery_tag);
                Received::Delivery(delivery, live.acks.clone())
            }
            Some(Err(e)) => Received::Lost(self.live.take(), e),
            None => Received::Cancelled(self.live.take()),
        })
    }

    /// Consumes again on the connection of the moment.
    pub(super) async fn restart(&mut self) -> Resumed {
        match self.start().await {
            Ok(live) => {
                tracing::info!(queue = %self.consumed, consumer_tag = %live.tag, "consuming again on the new connection");
                self.live = Some(live);
            }
            Err(error) if error.is_transient() => {
                tracing::debug!(queue = %self.consumed, %error, "could not consume yet; trying again");
                self.pause().await;
            }
            Err(Error::ShutDown) => return Resumed::End(None),
            Err(error) => {
                tracing::error!(queue = %self.consumed, %error, "cannot consume; the stream ends");
                return Resumed::End(Some(error));
            }
        }
        Resumed::Again
    }

    /// The consumer failed: its connection is most likely gone.
    pub(super) async fn lost(&mut self, live: Option<Live>, error: lapin::Error) {
        let Some(live) = live else { return };
        if self.link.is_closed() {
            return;
        }
        tracing::warn!(queue = %self.consumed, consumer_tag = %live.tag, %error, "the consumer was lost; consuming again once the connection is back");
        self.link.suspect(live.generation);
        drop(live);
        self.pause().await;
    }

    /// The consumer ended: the broker cancelled it (its queue was deleted),
    /// or its channel closed.
    pub(super) async fn cancelled(&mut self, live: Option<Live>) -> Resumed {
        let Some(live) = live else {
            return Resumed::Again;
        };
        let connected = live.acks.channel().status().connected();
        // We never cancel a consumer that is still being polled, so the
        // broker did: its queue was deleted, or (RabbitMQ 4.3, a quorum
        // queue) a delivery stayed unacknowledged past its consumer
        // timeout. Which one, the queue's existence tells.
        // A missing queue closes the channel, which is done with anyway.
        let timed_out = connected
            && declare::passive(live.acks.channel(), &self.consumed)
                .await
                .is_ok();
        let working = live.acks.working();
        let Live {
            consumer,
            acks,
            tag,
            generation,
        } = live;
        drop((consumer, acks));
        if self.link.is_closed() {
            return Resumed::Again;
        }
        if timed_out {
            tracing::warn!(
                queue = %self.consumed,
                consumer_tag = %tag,
                unsettled = working,
                "the broker cancelled the consumer although its queue exists, most likely because \
                 a delivery stayed unacknowledged past the broker's consumer timeout (RabbitMQ \
                 4.3 cancels a quorum queue's consumer for it): the job it cut short, one of the \
                 {working} this consumer still held, goes to another consumer and may run twice; \
                 raise the broker's consumer_timeout or keep the job timeout under it. Consuming \
                 again"
            );
        } else if connected {
            tracing::warn!(
                queue = %self.consumed,
                consumer_tag = %tag,
                "the broker cancelled the consumer (was the queue deleted?); declaring the queue again and consuming"
            );
            if let Err(error) = self.redeclare().await {
                if !error.is_transient() {
                    tracing::error!(queue = %self.queue, %error, "could not declare the queue again; the stream ends");
                    return Resumed::End(Some(error));
                }
                tracing::warn!(queue = %self.queue, %error, "could not declare the queue again yet");
            }
        } else {
            tracing::warn!(queue = %self.consumed, consumer_tag = %tag, "the consumer's channel closed; consuming again once the connection is back");
            self.link.suspect(generation);
        }
        self.pause().await;
        Resumed::Again
    }

    /// Declares the consumed queue (and its dead-letter queue) again.
    async fn redeclare(&self) -> Result<(), Error> {
        let what = format!("declaring `{}` again", self.queue);
        let options = self.outbox.options();
        let config = std::slice::from_ref(&self.config);
        self.link
            .call(&what, |current| async move {
                declare::declare_queues(&current.connection, options, config, |_| {}).await
            })
            .await
    }
}
