//! An in-process backend with the broker's semantics, for development and
//! tests.
//!
//! [`MemoryBackend`] keeps queues in memory and behaves like the RabbitMQ
//! backend wherever a user can tell:
//!
//! | behaviour | memory backend |
//! |---|---|
//! | priorities | higher first, FIFO within a level; values above the queue's top level count as the top level; a queue with `max_priority(0)` ignores them |
//! | holds (`publish_after`, `defer`, `Delivery::retry`/`defer`) | released once their delay has passed, never earlier; delays rounded up to a granularity (1 ms by default) and refused past [`MAX_DEFERRAL_MS`](crate::MAX_DEFERRAL_MS) |
//! | holds onto a queue not declared through this backend | [`Error::UnknownQueue`] |
//! | publishing to a queue that does not exist | an error of kind [`BackendErrorKind::Unroutable`] |
//! | dead letters | kept per queue with reason, original queue and attempts |
//! | a body that is not an envelope | dead-lettered verbatim with reason `malformed envelope` |
//! | prefetch | at most `prefetch` unsettled deliveries per consumer |
//! | a delivery nacked, or dropped unsettled | back in its place, `redelivered = true` |
//! | `message_ttl` | messages older than the TTL are dropped when they reach the head |
//! | control commands ([`ControlChannel`]) | applied at once to one view shared by every worker of the backend |
//! | heartbeats ([`Heartbeats`]) | the latest of each worker, listed for three of its intervals |
//! | job results ([`Replies`]) | a oneshot per waiting caller; the reply address travels with the job through holds, retries and deferrals; a reply to a caller that stopped waiting is dropped; closing the backend ends every wait |
//!
//! Time is tokio's, so under `tokio::time::pause` tests of delays are exact
//! and instant. Nothing is persisted: a process exit loses everything.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), queuey_core::Error> {
//! use std::time::Duration;
//! use queuey_core::{Envelope, QueueConfig};
//! use queuey_core::memory::MemoryBackend;
//! use queuey_core::backend::Backend;
//!
//! let backend = MemoryBackend::new();
//! backend.declare(&[QueueConfig::new("q")]).await?;
//! let payload = serde_json::value::to_raw_value(&"hi").unwrap();
//! backend.publish_after(&Envelope::new("t", "q", payload), Duration::from_millis(1500)).await?;
//!
//! tokio::time::advance(Duration::from_millis(1499)).await;
//! assert_eq!(backend.ready_count("q"), 0);
//! tokio::time::advance(Duration::from_millis(1)).await;
//! assert_eq!(backend.ready_count("q"), 1);
//! # Ok(())
//! # }
//! ```

mod consumer;
mod dead_letter;
mod delivery;
mod journal;
mod leadership;
mod replies;
mod state;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::{BoxFuture, ready};
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

pub use dead_letter::DeadLetter;
pub use delivery::MemoryDelivery;
pub use journal::{Settlement, SettlementLog};

use self::state::{Held, Message, QueueState, State};
use crate::backend::{
    Backend, Capabilities, ConnectionState, ControlChannel, DeliveryStream, Granularity,
    Heartbeats, HoldKind, PendingReply, Replies, Reply, ReplyTo, hold_delay_ms,
};
use crate::control::{ControlRecord, ControlView, Heartbeat};
use crate::{BackendError, BackendErrorKind, Envelope, Error, MAX_MESSAGE_BYTES, QueueConfig};

/// Settings of a [`MemoryBackend`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryOptions {
    retry_granularity: Granularity,
    deferred_granularity: Granularity,
}

impl Default for MemoryOptions {
    /// Both granularities 1 ms: delays are kept as given.
    fn default() -> Self {
        MemoryOptions {
            retry_granularity: Granularity::Fixed(Duration::from_millis(1)),
            deferred_granularity: Granularity::Fixed(Duration::from_millis(1)),
        }
    }
}

impl MemoryOptions {
    /// Rounding for retries and delayed enqueues (default 1 ms): a step
    /// (`Duration`) or any [`Granularity`]. Zero or sub-millisecond steps
    /// count as 1 ms.
    pub fn retry_granularity(mut self, granularity: impl Into<Granularity>) -> Self {
        self.retry_granularity = granularity.into();
        self
    }

    /// Rounding for deferrals (default 1 ms): a step (`Duration`) or any
    /// [`Granularity`]. Zero or sub-millisecond steps count as 1 ms.
    pub fn deferred_granularity(mut self, granularity: impl Into<Granularity>) -> Self {
        self.deferred_granularity = granularity.into();
        self
    }
}

/// An in-process backend; see the [module documentation](self).
///
/// Cheap to clone: clones share the same queues.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Broker>,
}

#[derive(Default)]
pub(crate) struct Broker {
    state: Mutex<State>,
    notify: Notify,
    /// Woken once, by [`MemoryBackend::close`]: what waits for the
    /// connection state to change waits for this, not for every push.
    closing: Notify,
    options: MemoryOptions,
    /// Schedule leases, for periodic jobs.
    leases: leadership::Leases,
    /// Callers waiting for a job's result.
    replies: replies::Replies,
    /// The control commands sent through this backend.
    control: ControlView,
    /// The latest heartbeat of each worker, with when it came.
    heartbeats: Mutex<HashMap<Uuid, (Instant, Heartbeat)>>,
    /// Who records the deliveries settled.
    journal: journal::Journal,
}

impl Broker {
    fn lock(&self) -> MutexGuard<'_, State> {
        crate::lock(&self.state)
    }

    /// The state, or [`Error::ShutDown`] once the backend is closed.
    fn open(&self) -> Result<MutexGuard<'_, State>, Error> {
        let state = self.lock();
        if state.closed {
            return Err(Error::ShutDown);
        }
        Ok(state)
    }

    fn publish_now(&self, envelope: &Envelope) -> Result<(), Error> {
        let body = encode(envelope)?;
        self.push(
            &envelope.queue,
            body,
            envelope.priority,
            envelope.reply_to.clone(),
        )
    }

    /// Puts a message at the back of `queue`'s ready list.
    fn push(
        &self,
        queue: &str,
        body: Arc<[u8]>,
        priority: u8,
        reply_to: Option<ReplyTo>,
    ) -> Result<(), Error> {
        let mut state = self.open()?;
        if !state.queues.contains_key(queue) {
            return Err(unroutable(queue));
        }
        let seq = state.next_seq();
        let message = Message {
            body,
            priority,
            redelivered: false,
            arrived: Instant::now(),
            reply_to,
        };
        state.push_ready(queue, message, seq);
        drop(state);
        self.notify.notify_waiters();
        Ok(())
    }

    fn hold(&self, envelope: &Envelope, delay: Duration, kind: HoldKind) -> Result<(), Error> {
        let queue = envelope.queue.as_str();
        let top = self
            .open()?
            .queues
            .get(queue)
            .and_then(|q| q.declared.as_ref())
            .map(QueueConfig::top_priority)
            .ok_or_else(|| Error::UnknownQueue {
                queue: queue.to_owned(),
            })?;
        let (granularity, priority) = match kind {
            HoldKind::Retry => (self.options.retry_granularity, envelope.priority),
            HoldKind::Deferral => (self.options.deferred_granularity, top),
        };
        let ms = hold_delay_ms(queue, delay, granularity)?;
        let mut stamped = envelope.clone();
        stamped.priority = priority;
        if ms == 0 {
            return self.publish_now(&stamped);
        }
        let body = encode(&stamped)?;
        let due = Instant::now() + Duration::from_millis(ms);
        let mut state = self.lock();
        let seq = state.next_seq();
        state.holds.insert(
            (due, seq),
            Held {
                queue: queue.to_owned(),
                message: Message {
                    body,
                    priority,
                    redelivered: false,
                    arrived: due,
                    reply_to: envelope.reply_to.clone(),
                },
            },
        );
        drop(state);
        self.notify.notify_waiters();
        Ok(())
    }

    fn store_dead_letter(&self, letter: DeadLetter) {
        let mut state = self.lock();
        if let Some(q) = state.queues.get_mut(&letter.original_queue) {
            q.dead.push(letter);
        }
    }

    fn inspect<T>(&self, queue: &str, f: impl FnOnce(&QueueState) -> T) -> Option<T> {
        let mut state = self.lock();
        state.release_due(Instant::now());
        state.queues.get(queue).map(f)
    }
}

fn encode(envelope: &Envelope) -> Result<Arc<[u8]>, Error> {
    let body = envelope.encode().map_err(|source| Error::Encode {
        queue: envelope.queue.clone(),
        source,
    })?;
    if body.len() > MAX_MESSAGE_BYTES {
        return Err(Error::MessageTooLarge {
            queue: envelope.queue.clone(),
            size: body.len(),
            limit: MAX_MESSAGE_BYTES,
        });
    }
    Ok(body.into())
}

fn unroutable(queue: &str) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::Unroutable,
        format!("no queue `{queue}` exists in the memory backend; the message is unroutable"),
    ))
}

impl MemoryBackend {
    /// An empty backend with the default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty backend with the given options.
    pub fn with_options(options: MemoryOptions) -> Self {
        MemoryBackend {
            shared: Arc::new(Broker {
                options,
                ..Broker::default()
            }),
        }
    }

    /// Creates a queue as another process would: publishes reach it, but it
    /// does not count as declared through this backend, so holds onto it are
    /// refused with [`Error::UnknownQueue`]. Does nothing if it exists.
    pub fn create_queue(&self, name: &str) {
        let mut state = self.shared.lock();
        state.queues.entry(name.to_owned()).or_default();
    }

    /// Publishes raw bytes to a queue, bypassing the envelope: a test hook
    /// for bodies a foreign producer might send. Fails if the queue does not
    /// exist.
    pub fn publish_raw(&self, queue: &str, body: impl Into<Vec<u8>>) -> Result<(), Error> {
        self.shared.push(queue, body.into().into(), 0, None)
    }

    /// Messages waiting on the queue (holds that are due count as waiting).
    pub fn ready_count(&self, queue: &str) -> usize {
        self.shared.inspect(queue, |q| q.ready.len()).unwrap_or(0)
    }

    /// Messages in holds that will return to the queue.
    pub fn held_count(&self, queue: &str) -> usize {
        let mut state = self.shared.lock();
        state.release_due(Instant::now());
        state.holds.values().filter(|h| h.queue == queue).count()
    }

    /// When the first message held for the queue comes back to it (by
    /// tokio's clock), or `None` when nothing is held for it.
    pub fn next_release(&self, queue: &str) -> Option<Instant> {
        let mut state = self.shared.lock();
        state.release_due(Instant::now());
        state
            .holds
            .iter()
            .find(|(_, held)| held.queue == queue)
            .map(|((due, _), _)| *due)
    }

    /// Resolves at the next change of this backend's queues: a publish, a
    /// hold, a delivery settled or handed back, or [`close`](Self::close).
    /// It waits from this call on, not from its first poll, so a test can
    /// look at the queues and then wait without missing a change in
    /// between.
    pub fn changed(&self) -> impl Future<Output = ()> + Send + '_ {
        let mut notified = Box::pin(self.shared.notify.notified());
        // Registered now: a wake-up before the first poll is kept.
        notified.as_mut().enable();
        notified
    }

    /// Starts recording every delivery this backend settles, with its job
    /// and what became of it, until the returned log is dropped. Tests read
    /// it to see each retry, deferral and dead letter of a run.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), queuey_core::Error> {
    /// use futures::StreamExt;
    /// use std::time::Duration;
    /// use queuey_core::{Disposition, Envelope, QueueConfig};
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::backend::Backend;
    ///
    /// let backend = MemoryBackend::new();
    /// let queue = QueueConfig::new("q");
    /// backend.declare(std::slice::from_ref(&queue)).await?;
    /// let payload = serde_json::value::to_raw_value(&"hi").unwrap();
    /// backend.publish(&Envelope::new("greet", "q", payload)).await?;
    ///
    /// let log = backend.record_settlements();
    /// let mut deliveries = backend.consume(&queue).await?;
    /// let delivery = deliveries.next().await.unwrap()?;
    /// delivery.settle(Disposition::Retry { delay: Duration::from_secs(1) }).await?;
    ///
    /// let settled = log.take();
    /// assert_eq!(settled.len(), 1);
    /// assert_eq!(settled[0].job_type, "greet");
    /// assert_eq!(settled[0].disposition, Disposition::Retry { delay: Duration::from_secs(1) });
    /// # Ok(())
    /// # }
    /// ```
    pub fn record_settlements(&self) -> SettlementLog {
        self.shared.journal.open()
    }

    /// Deliveries from the queue not yet settled.
    pub fn unacked_count(&self, queue: &str) -> usize {
        self.shared.inspect(queue, |q| q.unacked.len()).unwrap_or(0)
    }

    /// The queue's dead letters, oldest first.
    pub fn dead_letters(&self, queue: &str) -> Vec<DeadLetter> {
        self.shared
            .inspect(queue, |q| q.dead.clone())
            .unwrap_or_default()
    }

    /// Removes and returns the queue's dead letters.
    pub fn take_dead_letters(&self, queue: &str) -> Vec<DeadLetter> {
        let mut state = self.shared.lock();
        state
            .queues
            .get_mut(queue)
            .map(|q| std::mem::take(&mut q.dead))
            .unwrap_or_default()
    }

    /// Whether the queue was declared through this backend.
    pub fn is_declared(&self, queue: &str) -> bool {
        self.shared
            .inspect(queue, |q| q.declared.is_some())
            .unwrap_or(false)
    }

    /// Closes the backend: consumer streams end and every later call fails
    /// with [`Error::ShutDown`]. Unsettled deliveries are kept as they are.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.replies.close();
        self.shared.notify.notify_waiters();
        self.shared.closing.notify_waiters();
    }
}

impl Backend for MemoryBackend {
    fn declare<'a>(&'a self, queues: &'a [QueueConfig]) -> BoxFuture<'a, Result<(), Error>> {
        let result = (|| {
            for config in queues {
                config.validate()?;
            }
            let mut state = self.shared.open()?;
            for config in queues.iter().flat_map(QueueConfig::physical) {
                let config = &config;
                let queue = state.queues.entry(config.name().to_owned()).or_default();
                if let Some(existing) = &queue.declared
                    && (existing.priority_levels() != config.priority_levels()
                        || existing.settings().durable() != config.settings().durable()
                        || existing.settings().message_ttl() != config.settings().message_ttl())
                {
                    return Err(Error::Backend(BackendError::new(
                        BackendErrorKind::Refused,
                        format!(
                            "queue `{}` was already declared with other arguments; \
                             a queue's arguments cannot change once it exists",
                            config.name()
                        ),
                    )));
                }
                queue.declared = Some(config.clone());
            }
            Ok(())
        })();
        Box::pin(ready(result))
    }

    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(ready(self.shared.publish_now(envelope)))
    }

    fn publish_after<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(ready(self.shared.hold(envelope, delay, HoldKind::Retry)))
    }

    fn defer<'a>(
        &'a self,
        envelope: &'a Envelope,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(ready(self.shared.hold(envelope, delay, HoldKind::Deferral)))
    }

    /// [`Closed`](ConnectionState::Closed) once [`close`](MemoryBackend::close)
    /// was called, else [`Connected`](ConnectionState::Connected).
    fn connection_state(&self) -> ConnectionState {
        if self.shared.lock().closed {
            ConnectionState::Closed
        } else {
            ConnectionState::Connected
        }
    }

    /// Resolves once [`close`](MemoryBackend::close) was called, when
    /// `seen` is [`Connected`](ConnectionState::Connected).
    fn connection_changed(&self, seen: ConnectionState) -> BoxFuture<'_, ConnectionState> {
        Box::pin(async move {
            loop {
                // Registered before the look, so a close in between wakes it.
                let notified = self.shared.closing.notified();
                let now = self.connection_state();
                if now != seen {
                    return now;
                }
                notified.await;
            }
        })
    }

    /// Replies, control commands and heartbeats: all three.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none()
            .with_replies(self)
            .with_control(self)
            .with_heartbeats(self)
    }

    fn consume<'a>(
        &'a self,
        queue: &'a QueueConfig,
    ) -> BoxFuture<'a, Result<DeliveryStream, Error>> {
        let result = (|| {
            queue.validate()?;
            if !self.shared.open()?.queues.contains_key(queue.name()) {
                return Err(Error::Backend(BackendError::new(
                    BackendErrorKind::Refused,
                    format!(
                        "cannot consume `{}`: no such queue (declare it first)",
                        queue.name()
                    ),
                )));
            }
            Ok(consumer::stream(
                Arc::clone(&self.shared),
                Arc::from(queue.name()),
                usize::from(queue.settings().prefetch()),
            ))
        })();
        Box::pin(ready(result))
    }
}

impl Replies for MemoryBackend {
    /// Publishes at once, with a reply address in this process: the
    /// caller's oneshot.
    fn request<'a>(&'a self, envelope: Envelope) -> BoxFuture<'a, Result<PendingReply, Error>> {
        Box::pin(ready(replies::request(&self.shared, envelope)))
    }

    /// Hands the reply to its caller in this process; a caller that
    /// stopped waiting is not an error.
    fn reply<'a>(&'a self, to: &'a ReplyTo, reply: Reply) -> BoxFuture<'a, Result<(), Error>> {
        replies::reply(&self.shared, to, reply);
        Box::pin(ready(Ok(())))
    }
}

impl ControlChannel for MemoryBackend {
    /// Applies the command to the one view every worker of this backend
    /// follows.
    fn send_control<'a>(&'a self, record: &'a ControlRecord) -> BoxFuture<'a, Result<(), Error>> {
        let result = self.shared.open().map(drop).and_then(|()| {
            record.check(crate::clock::now_ms())?;
            self.shared.control.apply(record);
            Ok(())
        });
        Box::pin(ready(result))
    }

    fn follow_control<'a>(&'a self) -> BoxFuture<'a, Result<ControlView, Error>> {
        Box::pin(ready(Ok(self.shared.control.clone())))
    }
}

impl Heartbeats for MemoryBackend {
    /// Keeps the worker's latest heartbeat; its last one removes it.
    fn heartbeat<'a>(&'a self, beat: &'a Heartbeat) -> BoxFuture<'a, Result<(), Error>> {
        let mut beats = crate::lock(&self.shared.heartbeats);
        if beat.stopping {
            beats.remove(&beat.worker_id);
        } else {
            beats.insert(beat.worker_id, (Instant::now(), beat.clone()));
        }
        Box::pin(ready(Ok(())))
    }

    /// The workers heard from within their heartbeats' lifetime (by tokio
    /// time), oldest first.
    fn workers<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Heartbeat>, Error>> {
        let now = Instant::now();
        let mut beats = crate::lock(&self.shared.heartbeats);
        beats.retain(|_, (at, beat)| now.saturating_duration_since(*at) <= beat.lifetime());
        let mut workers: Vec<Heartbeat> = beats.values().map(|(_, beat)| beat.clone()).collect();
        workers.sort_by_key(|beat| (beat.started_at_ms, beat.worker_id));
        Box::pin(ready(Ok(workers)))
    }
}

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("MemoryBackend")
            .field("queues", &state.queues.len())
            .field("holds", &state.holds.len())
            .field("closed", &state.closed)
            .field("options", &self.shared.options)
            .finish()
    }
}
