//! Consuming a queue: a fresh channel per consumer, its prefetch and its
//! tag (`live`, `tag`), and what happens to each delivery: decoded and
//! routed (`route`), then dispatched (`dispatch`) to the worker as a
//! [`RabbitMqDelivery`](delivery::RabbitMqDelivery), to its hold again, to
//! the poison guard (`guard`) or, for a body that is not an envelope, to
//! the dead-letter queue (`malformed`). Settling a delivery is `settle`,
//! over the channel's coalesced acknowledgements (`acks`). A stream
//! dropped retires its consumers gracefully (`retire`).

mod acks;
mod delivery;
mod dispatch;
mod guard;
mod live;
mod malformed;
mod retire;
mod retirements;
mod route;
mod settle;
mod tag;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use queuey_core::backend::{Delivery, DeliveryStream};
use queuey_core::{Error, QueueConfig};
use tokio::sync::RwLock;

use crate::link::Link;
use crate::outbox::Outbox;
use crate::topology;
use delivery::RabbitMqDelivery;
use dispatch::Errand;
use live::{Live, Received, Resumed};
pub(crate) use retirements::Retirements;

/// Starts a consumer of `config`'s queue on a channel of its own (and,
/// with the [poison guard](crate#poison-guard) on, one of its suspect
/// queue with a prefetch of 1), merged into one stream.
///
/// The stream outlives the connection: each consumer consumes again on the
/// next connection (or after the broker cancelled it), declaring the queues
/// again first if they were gone. It ends with an error only for what
/// cannot heal, and with `None` once the backend is closed. Dropping it
/// retires each consumer on a task of its own: every delivery received but
/// not handed out is handed back as a new message.
pub(crate) async fn consume(
    link: Arc<Link>,
    outbox: Arc<Outbox>,
    retirements: Arc<Retirements>,
    config: &QueueConfig,
) -> Result<DeliveryStream, Error> {
    config.validate()?;
    link.ensure_open()?;
    let suspects = outbox
        .options()
        .suspect_suffix_in_use()
        .map(|suffix| topology::suspect_queue_name(config.name(), suffix));
    // The consumers start now, so that a refusal is the caller's error.
    let gate = Arc::new(RwLock::new(()));
    let work = Consumer::start_on(
        Arc::clone(&link),
        Arc::clone(&outbox),
        Arc::clone(&retirements),
        config,
        Source::Work,
        Arc::clone(&gate),
    )
    .await?;
    match suspects {
        None => Ok(work.into_stream()),
        Some(name) => {
            let source = Source::Suspects(Arc::from(name));
            let suspects =
                Consumer::start_on(link, outbox, retirements, config, source, gate).await?;
            Ok(futures::stream::select(work.into_stream(), suspects.into_stream()).boxed())
        }
    }
}

/// Which queue a consumer takes from.
#[derive(Debug, Clone)]
enum Source {
    /// The work queue itself, with its prefetch.
    Work,
    /// Its suspect queue (the name), one delivery at a time.
    Suspects(Arc<str>),
}

/// The first pause before consuming again on a working connection; it
/// doubles on every loss in a row, up to [`RESUME_PAUSE_MAX`].
const RESUME_PAUSE_MIN: Duration = Duration::from_millis(50);
const RESUME_PAUSE_MAX: Duration = Duration::from_secs(2);

/// One consumer of a queue, across connections.
struct Consumer {
    link: Arc<Link>,
    outbox: Arc<Outbox>,
    /// The backend's retirements under way, which closing it waits for.
    retirements: Arc<Retirements>,
    config: QueueConfig,
    /// The work queue: the queue of every delivery, whichever it came from.
    queue: Arc<str>,
    source: Source,
    /// The queue consumed: the work queue or its suspect queue.
    consumed: Arc<str>,
    live: Option<Live>,
    ended: bool,
    pause: Duration,
    /// Shared by the consumers of one stream: each move of the poison guard
    /// holds it (shared) until the broker has its acknowledgement, and a
    /// delivery is handed to the worker only once it is free, so a job that
    /// kills the process the moment it runs cannot cut off the
    /// acknowledgement of the original and leave the job twice.
    gate: Arc<RwLock<()>>,
    /// A delivery on its way to the worker, waiting for the gate.
    parked: Option<Box<RabbitMqDelivery>>,
}

impl Consumer {
    /// A consumer of `source`, consuming already.
    async fn start_on(
        link: Arc<Link>,
        outbox: Arc<Outbox>,
        retirements: Arc<Retirements>,
        config: &QueueConfig,
        source: Source,
        gate: Arc<RwLock<()>>,
    ) -> Result<Consumer, Error> {
        let queue: Arc<str> = Arc::from(config.name());
        let consumed = match &source {
            Source::Work => Arc::clone(&queue),
            Source::Suspects(name) => Arc::clone(name),
        };
        let mut state = Consumer {
            link,
            outbox,
            retirements,
            config: config.clone(),
            queue,
            source,
            consumed,
            live: None,
            ended: false,
            pause: RESUME_PAUSE_MIN,
            gate,
            parked: None,
        };
        state.live = Some(state.start().await?);
        Ok(state)
    }

    fn into_stream(self) -> DeliveryStream {
        Box::pin(Deliveries {
            consumer: Some(Box::new(self)),
            waiting: None,
        })
    }

    fn prefetch(&self) -> u16 {
        match self.source {
            Source::Work => self.config.settings().prefetch(),
            Source::Suspects(_) => 1,
        }
    }

    /// The next delivery for the worker, looked for without waiting; what
    /// must be waited for first (a restart, an errand) comes out as the
    /// wait.
    fn poll_next_delivery(&mut self, cx: &mut Context<'_>) -> Poll<Result<Item, Wait>> {
        if self.ended {
            return Poll::Ready(Ok(None));
        }
        if self.link.is_closed() {
            self.ended = true;
            return Poll::Ready(Ok(None));
        }
        Poll::Ready(match ready!(self.poll_receive(cx)) {
            Received::Delivery(delivery, acks) => match self.dispatch_now(delivery, acks) {
                Ok(delivery) => Ok(Some(Ok(delivery))),
                Err(errand) => Err(Wait::Errand(errand)),
            },
            Received::Restart => Err(Wait::Restart),
            Received::Lost(live, error) => Err(Wait::Lost(live, error)),
            Received::Cancelled(live) => Err(Wait::Cancelled(live)),
        })
    }

    /// Waits for what [`poll_next_delivery`](Self::poll_next_delivery)
    /// could not do at once; `None`: look at the consumer again.
    async fn wait(&mut self, wait: Wait) -> Option<Item> {
        let resumed = match wait {
            Wait::Errand(errand) => {
                return self
                    .errand(*errand)
                    .await
                    .map(|delivery| Some(Ok(delivery as Box<dyn Delivery>)));
            }
            Wait::Restart => self.restart().await,
            Wait::Lost(live, error) => {
                self.lost(live, error).await;
                Resumed::Again
            }
            Wait::Cancelled(live) => self.cancelled(live).await,
        };
        match resumed {
            Resumed::Again => None,
            Resumed::End(error) => {
                self.ended = true;
                Some(error.map(Err))
            }
        }
    }

    /// Waits before consuming again: not at all while the connection is
    /// down (the reconnection is the one pace of an outage; a dead
    /// connection not noticed yet is reported and waited out), else longer
    /// after each loss in a row, so a refusal is no hot loop.
    async fn pause(&mut self) {
        match self.link.current() {
            None => {}
            Some(current) if current.connection.status().connected() => {
                tokio::time::sleep(self.pause).await;
                self.pause = (self.pause * 2).min(RESUME_PAUSE_MAX);
            }
            Some(dead) => {
                self.link.suspect(dead.generation);
                self.link.gone(dead.generation).await;
            }
        }
    }
}

/// What the stream gives next: a delivery, an error, or its end.
type Item = Option<Result<Box<dyn Delivery>, Error>>;

/// What the consumer must wait for before its next delivery.
enum Wait {
    /// A delivery's errand.
    Errand(Box<Errand>),
    /// Starting the consumer again.
    Restart,
    /// Its loss: the consumer failed.
    Lost(Option<Live>, lapin::Error),
    /// Its end: the broker cancelled it, or its channel closed.
    Cancelled(Option<Live>),
}

/// A consumer's deliveries as a stream. A job due now comes out of the
/// poll that received it; a wait (a restart, an errand) runs as a future of
/// its own that has the consumer until it ends.
struct Deliveries {
    consumer: Option<Box<Consumer>>,
    waiting: Option<BoxFuture<'static, (Box<Consumer>, Option<Item>)>>,
}

impl Stream for Deliveries {
    type Item = Result<Box<dyn Delivery>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(waiting) = this.waiting.as_mut() {
                let (consumer, item) = ready!(waiting.as_mut().poll(cx));
                this.waiting = None;
                this.consumer = Some(consumer);
                if let Some(item) = item {
                    return Poll::Ready(item);
                }
            }
            let Some(consumer) = this.consumer.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(consumer.poll_next_delivery(cx)) {
                Ok(item) => return Poll::Ready(item),
                Err(wait) => {
                    let Some(mut consumer) = this.consumer.take() else {
                        return Poll::Ready(None);
                    };
                    this.waiting = Some(Box::pin(async move {
                        let item = consumer.wait(wait).await;
                        (consumer, item)
                    }));
                }
            }
        }
    }
}
