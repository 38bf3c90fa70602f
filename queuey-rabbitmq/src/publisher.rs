//! The publishing lanes: confirm-mode channels, each owned by one task that
//! keeps a window of publishes in flight.
//!
//! # Why one owner per channel
//!
//! lapin gives a returned (unroutable) message to whichever confirmation
//! completes next, not to the publish it belongs to, and publishes issued
//! on one channel from several threads can reach the broker in another
//! order than their delivery tags, so a confirmation can even resolve on
//! another message's ack. Both break the obvious designs. What holds:
//!
//! 1. **One task owns each channel** and issues every `basic.publish` on
//!    it; producers hand it requests over a queue. lapin's tag order is then
//!    the wire order.
//! 2. The task keeps every outstanding [`PublisherConfirm`] and never drops
//!    one unawaited while the channel lives.
//! 3. When woken, it polls **all** outstanding confirmations, again and
//!    again until a full pass finds nothing new, and records the
//!    `message_id` of every returned message it finds, whichever
//!    confirmation carried it.
//! 4. Only then does it decide each completed publish: returned if its own
//!    `message_id` was recorded, stored if acked, refused if nacked.
//!
//! The broker sends a message's return before its ack, and lapin resolves
//! confirmations in order on one thread, so once a publish is seen
//! complete, the confirmation carrying its return (if any) is complete too,
//! and the full pass of rule 3 has harvested it. Every publish carries a
//! unique `message_id` (the job id, or a fresh one).
//!
//! # Failures
//!
//! A channel that fails (a channel exception, the connection dying) is
//! dropped with whatever lapin still holds for it, never reused. Each
//! publish in flight on it then fails with
//! [`BackendErrorKind::Uncertain`] (it was sent, the broker may or may not
//! have it), a publish not yet sent with
//! [`BackendErrorKind::ConnectionLost`]; the caller publishes again
//! within its bound (a duplicate at worst, never a loss, never a false
//! success). The lane opens a fresh channel on the link's current
//! connection for its next request, waiting for a reconnection if needed.

use std::collections::HashMap;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::Poll;

use bytes::Bytes;
use lapin::PublisherConfirm;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation};
use queuey_core::{BackendError, BackendErrorKind, Error};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::error::{Confirmed, Failure, confirm_outcome};
use crate::link::{Current, Link};

/// One publish: where to, what, and the message id it carries. Cheap to
/// clone (the body is shared), so a caller can publish it again.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) queue: String,
    pub(crate) body: Bytes,
    pub(crate) message_id: String,
    pub(crate) properties: BasicProperties,
}

/// A publish handed to a lane, and where its outcome goes.
struct Request {
    out: Outgoing,
    /// The caller's bound: the lane waits for a reconnection no longer.
    deadline: Instant,
    reply: oneshot::Sender<Result<(), Error>>,
}

/// The publishing lanes of a backend: `channels` lanes, each a task owning
/// one confirm channel with up to `window` publishes in flight.
pub(crate) struct Publisher {
    lanes: Box<[Lane]>,
    closed: AtomicBool,
}

struct Lane {
    requests: mpsc::Sender<Request>,
    /// Requests handed to this lane and not answered yet.
    load: Arc<AtomicUsize>,
}

impl Publisher {
    /// Starts the lanes' tasks; each opens its channel on first use. Must
    /// be called inside a tokio runtime.
    pub(crate) fn new(link: Arc<Link>, channels: usize, window: usize) -> Self {
        let window = window.max(1);
        let lanes = (0..channels.max(1))
            .map(|_| {
                let (requests, queue) = mpsc::channel(window);
                let load = Arc::new(AtomicUsize::new(0));
                let owner = Owner {
                    link: Arc::clone(&link),
                    window,
                    load: Arc::clone(&load),
                    channel: None,
                    in_flight: Vec::with_capacity(window),
                    returned: HashMap::new(),
                    sequence: 0,
                };
                tokio::spawn(owner.run(queue));
                Lane { requests, load }
            })
            .collect();
        Publisher {
            lanes,
            closed: AtomicBool::new(false),
        }
    }

    /// Publishes to the default exchange with the queue as routing key,
    /// `mandatory`, and waits for the outcome: `Ok` only for an ack of a
    /// message that was not returned.
    pub(crate) async fn publish(&self, out: Outgoing, deadline: Instant) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let lane = self.least_loaded();
        let (reply, outcome) = oneshot::channel();
        lane.load.fetch_add(1, Ordering::Relaxed);
        let request = Request {
            out,
            deadline,
            reply,
        };
        if lane.requests.send(request).await.is_err() {
            lane.load.fetch_sub(1, Ordering::Relaxed);
            return Err(Error::ShutDown);
        }
        // The lane answers every request it took; a closed reply means its
        // task ended (the runtime is shutting down): nothing is known.
        outcome.await.unwrap_or(Err(Error::ShutDown))
    }

    /// The lane with the fewest requests outstanding, the lowest on a tie,
    /// so that a producer publishing one job at a time keeps to one channel.
    fn least_loaded(&self) -> &Lane {
        let mut best = &self.lanes[0];
        let mut best_load = best.load.load(Ordering::Relaxed);
        for lane in &self.lanes[1..] {
            if best_load == 0 {
                break;
            }
            let load = lane.load.load(Ordering::Relaxed);
            if load < best_load {
                best = lane;
                best_load = load;
            }
        }
        best
    }

    /// Closes the publisher: later publishes fail with [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher")
            .field("lanes", &self.lanes.len())
            .finish_non_exhaustive()
    }
}

/// A publish sent and not yet decided.
struct InFlight {
    /// Order of sending on this channel.
    sequence: u64,
    confirm: PublisherConfirm,
    queue: String,
    message_id: String,
    reply: oneshot::Sender<Result<(), Error>>,
}

/// What a confirmation said, before attribution.
enum Resolved {
    Acked,
    Nacked,
    NotRequested,
    Failed(lapin::Error),
}

/// A return harvested from some confirmation, kept by `message_id` until
/// its own publish completes.
struct Returned {
    reply_code: u16,
    reply_text: String,
}

/// The task owning one lane's channel.
struct Owner {
    link: Arc<Link>,
    window: usize,
    load: Arc<AtomicUsize>,
    /// The channel and the connection it is on.
    channel: Option<(Channel, Current)>,
    in_flight: Vec<InFlight>,
    returned: HashMap<String, Returned>,
    sequence: u64,
}

impl Owner {
    async fn run(mut self, mut requests: mpsc::Receiver<Request>) {
        loop {
            let room = self.in_flight.len() < self.window;
            tokio::select! {
                biased;
                completed = sweep(&mut self.in_flight, &mut self.returned),
                    if !self.in_flight.is_empty() => self.decide(completed),
                request = requests.recv(), if room => match request {
                    Some(request) => self.send(request).await,
                    None => break,
                },
            }
        }
        // Every sender is gone: the backend was dropped. Answer what is
        // still in flight before leaving.
        while !self.in_flight.is_empty() {
            let completed = sweep(&mut self.in_flight, &mut self.returned).await;
            self.decide(completed);
        }
    }

    fn answer(&self, reply: oneshot::Sender<Result<(), Error>>, outcome: Result<(), Error>) {
        self.load.fetch_sub(1, Ordering::Relaxed);
        // The caller may have given up (its bound passed): nothing to do.
        let _ = reply.send(outcome);
    }

    /// Sends one request on the lane's channel, opening one if needed.
    async fn send(&mut self, request: Request) {
        let Request {
            out,
            deadline,
            reply,
        } = request;
        if reply.is_closed() {
            // The caller gave up before the request was sent.
            self.answer(reply, Err(Error::ShutDown));
            return;
        }
        let routing_key = match ShortString::try_new(out.queue.as_str()) {
            Ok(key) => key,
            Err(_) => {
                let e = Error::invalid_config(format!(
                    "queue name `{}` is {} bytes, over the 255-byte AMQP limit",
                    out.queue,
                    out.queue.len()
                ));
                self.answer(reply, Err(e));
                return;
            }
        };
        let channel = match self.channel(deadline, &out.queue).await {
            Ok(channel) => channel,
            Err(e) => {
                self.answer(reply, Err(e));
                return;
            }
        };
        let published = channel
            .basic_publish(
                ShortString::default(),
                routing_key,
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                &out.body,
                out.properties,
            )
            .await;
        match published {
            Ok(confirm) => {
                self.sequence += 1;
                self.in_flight.push(InFlight {
                    sequence: self.sequence,
                    confirm,
                    queue: out.queue,
                    message_id: out.message_id,
                    reply,
                });
            }
            Err(e) => {
                // Refused before anything was written (the channel or the
                // connection is not open) or failed while writing: either
                // way this channel is done.
                let unsent = matches!(
                    e.kind(),
                    lapin::ErrorKind::InvalidChannelState(..)
                        | lapin::ErrorKind::InvalidConnectionState(_)
                );
                let what = format!("publishing to `{}`", out.queue);
                let error = if unsent {
                    lost(&what, &e)
                } else {
                    uncertain(&what, &e.to_string())
                };
                self.answer(reply, Err(error));
                self.abandon_channel(&e.to_string());
            }
        }
    }

    /// The lane's channel, opened (in confirm mode) on the current
    /// connection if there is none or it closed; waits for a reconnection
    /// until `deadline`.
    async fn channel(&mut self, deadline: Instant, queue: &str) -> Result<Channel, Error> {
        if let Some((channel, _)) = &self.channel
            && channel.status().connected()
        {
            return Ok(channel.clone());
        }
        if self.channel.is_some() {
            // Closed under us: whatever is in flight on it is unknown.
            self.abandon_channel("the publishing channel closed");
        }
        let what = || format!("publishing to `{queue}`");
        if self.link.is_closed() {
            return Err(Error::ShutDown);
        }
        let current = match self.link.current() {
            Some(current) => current,
            None => self.link.connection_until(deadline, &what()).await?,
        };
        let connection = Arc::clone(&current.connection);
        let connection = &*connection;
        let fail = |e: lapin::Error| {
            Failure::of(&e, connection.status().connected())
                .into_error(&format!("opening a publishing channel for `{queue}`"))
        };
        let opening = async {
            let channel = connection.create_channel().await.map_err(fail)?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(fail)?;
            Ok::<_, Error>(channel)
        };
        let opened = match tokio::time::timeout_at(deadline, opening).await {
            Ok(opened) => opened,
            Err(_) => Err(crate::backend::timed_out(
                &format!("opening a publishing channel for `{queue}`"),
                deadline.saturating_duration_since(Instant::now()),
            )),
        };
        match opened {
            Ok(channel) => {
                self.channel = Some((channel.clone(), current));
                Ok(channel)
            }
            Err(e) => {
                if e.is_connection_lost() {
                    self.link.suspect(current.generation);
                }
                Err(e)
            }
        }
    }

    /// Answers the publishes a sweep found complete (rule 4), and drops
    /// the channel if one of them says it failed.
    fn decide(&mut self, completed: Vec<(InFlight, Resolved)>) {
        let mut failed = Vec::new();
        for (entry, resolved) in completed {
            let returned = self.returned.remove(&entry.message_id);
            let outcome = match (returned, resolved) {
                (_, Resolved::Failed(e)) => {
                    failed.push((entry, e));
                    continue;
                }
                (Some(returned), _) => confirm_outcome(
                    &entry.queue,
                    &entry.message_id,
                    Confirmed::Returned {
                        message_id: Some(entry.message_id.clone()),
                        reply_code: returned.reply_code,
                        reply_text: returned.reply_text,
                    },
                ),
                (None, Resolved::Acked) => {
                    confirm_outcome(&entry.queue, &entry.message_id, Confirmed::Ack)
                }
                (None, Resolved::Nacked) => {
                    confirm_outcome(&entry.queue, &entry.message_id, Confirmed::Nack)
                }
                (None, Resolved::NotRequested) => {
                    confirm_outcome(&entry.queue, &entry.message_id, Confirmed::NotRequested)
                }
            };
            self.answer(entry.reply, outcome);
        }
        if !failed.is_empty() {
            self.channel_failed(failed);
        }
    }

    /// A confirmation failed: the channel (or its connection) is gone. The
    /// publishes still in flight on it are answered and the channel
    /// dropped, together with every return lapin may still hold for it.
    ///
    /// When the broker closed only the channel (a refused publish: access
    /// refused, a message over the broker's size limit), the oldest publish
    /// in flight gets the broker's reason: it is the first the broker can
    /// have refused. Every other one is [`BackendErrorKind::Uncertain`], and
    /// its caller publishes it again on a fresh channel.
    fn channel_failed(&mut self, failed: Vec<(InFlight, lapin::Error)>) {
        let connection_alive = self
            .channel
            .as_ref()
            .is_some_and(|(_, current)| current.connection.status().connected());
        let mut failed = failed.into_iter();
        let Some((first, error)) = failed.next() else {
            return;
        };
        let failure = Failure::of(&error, connection_alive);
        let mut victims: Vec<InFlight> = std::iter::once(first)
            .chain(failed.map(|(entry, _)| entry))
            .chain(self.in_flight.drain(..))
            .collect();
        victims.sort_by_key(|entry| entry.sequence);
        let mut victims = victims.into_iter();
        if failure.reply_code.is_some()
            && !failure.connection_lost
            && let Some(oldest) = victims.next()
        {
            let what = format!("publishing to `{}`", oldest.queue);
            self.answer(oldest.reply, Err(failure.clone().into_error(&what)));
        }
        for entry in victims {
            let what = format!("publishing to `{}`", entry.queue);
            self.answer(entry.reply, Err(uncertain(&what, &failure.text)));
        }
        self.drop_channel(failure.connection_lost);
    }

    /// Fails every publish in flight as [`BackendErrorKind::Uncertain`] and
    /// drops the channel.
    fn abandon_channel(&mut self, why: &str) {
        let victims: Vec<InFlight> = self.in_flight.drain(..).collect();
        for entry in victims {
            let what = format!("publishing to `{}`", entry.queue);
            self.answer(entry.reply, Err(uncertain(&what, why)));
        }
        self.drop_channel(true);
    }

    /// Forgets the channel and the returns recorded on it; reports its
    /// connection to the supervisor when it looks lost.
    fn drop_channel(&mut self, connection_suspect: bool) {
        self.returned.clear();
        if let Some((channel, current)) = self.channel.take() {
            if connection_suspect {
                self.link.suspect(current.generation);
            }
            if channel.status().connected() {
                tokio::spawn(async move {
                    let _ = channel.close(200, ShortString::default()).await;
                });
            }
        }
    }
}

/// Polls every outstanding confirmation, repeating until a full pass finds
/// none newly complete (rule 3); resolves once at least one completed.
/// Returns found on any confirmation are recorded by `message_id`.
fn sweep<'a>(
    in_flight: &'a mut Vec<InFlight>,
    returned: &'a mut HashMap<String, Returned>,
) -> impl Future<Output = Vec<(InFlight, Resolved)>> + 'a {
    poll_fn(move |cx| {
        let mut completed = Vec::new();
        loop {
            let mut found = false;
            let mut i = 0;
            while i < in_flight.len() {
                match Pin::new(&mut in_flight[i].confirm).poll(cx) {
                    Poll::Ready(result) => {
                        let entry = in_flight.swap_remove(i);
                        let resolved = match result {
                            Ok(Confirmation::Ack(r)) => {
                                record(returned, r);
                                Resolved::Acked
                            }
                            Ok(Confirmation::Nack(r)) => {
                                record(returned, r);
                                Resolved::Nacked
                            }
                            Ok(Confirmation::NotRequested) => Resolved::NotRequested,
                            Err(e) => Resolved::Failed(e),
                        };
                        completed.push((entry, resolved));
                        found = true;
                    }
                    Poll::Pending => i += 1,
                }
            }
            if !found {
                break;
            }
        }
        if completed.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(completed)
        }
    })
}

fn record(
    returned: &mut HashMap<String, Returned>,
    message: Option<lapin::message::BasicReturnMessage>,
) {
    let Some(message) = message else { return };
    let Some(id) = message.delivery.properties.message_id().as_ref() else {
        // Every message this crate publishes has an id; one without cannot
        // be attributed and is only logged.
        tracing::error!(
            reply_code = message.reply_code,
            "a returned message carries no message id; it cannot be attributed"
        );
        return;
    };
    returned.insert(
        id.as_str().to_owned(),
        Returned {
            reply_code: message.reply_code,
            reply_text: message.reply_text.as_str().to_owned(),
        },
    );
}

/// The error of a publish that was sent and never confirmed.
fn uncertain(what: &str, why: &str) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::Uncertain,
        format!(
            "{what}: the channel failed after the message was sent and before the broker \
             confirmed it ({why}); the broker may or may not have it"
        ),
    ))
}

/// The error of a publish that was never sent.
fn lost(what: &str, e: &lapin::Error) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::ConnectionLost,
        format!("{what}: the publishing channel is closed ({e}); nothing was sent"),
    ))
}
