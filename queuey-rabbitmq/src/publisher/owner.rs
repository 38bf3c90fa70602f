//! The task owning one lane: its channel, the publishes in flight, and the
//! channels it stopped using after the broker refused a publish on them.

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use lapin::Channel;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use queuey_core::Error;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::confirms::{InFlight, Resolved, Returned, Stage, Write, lost, sweep, uncertain};
use super::{Outgoing, Request};
use crate::error::{Confirmed, Failure, confirm_outcome};
use crate::link::{Current, Link};

/// An open confirm channel, numbered by the lane that opened it.
struct Open {
    id: u64,
    channel: Channel,
    /// The connection it is on.
    current: Current,
}

/// The task owning one lane.
pub(super) struct Owner {
    link: Arc<Link>,
    window: usize,
    load: Arc<AtomicUsize>,
    /// The channel new publishes go on.
    channel: Option<Open>,
    /// Channels the broker nacked a publish on. Nothing more is sent on
    /// them; each is closed once its last publish in flight is decided.
    refused: Vec<Open>,
    /// How many channels the lane has opened: the number of the last one.
    opened: u64,
    /// Publishes in flight on every channel of the lane, at most `window`.
    in_flight: Vec<InFlight>,
    returned: HashMap<String, Returned>,
    sequence: u64,
}

impl Owner {
    pub(super) fn new(link: Arc<Link>, window: usize, load: Arc<AtomicUsize>) -> Self {
        Owner {
            link,
            window,
            load,
            channel: None,
            refused: Vec::new(),
            opened: 0,
            in_flight: Vec::with_capacity(window),
            returned: HashMap::new(),
            sequence: 0,
        }
    }

    pub(super) async fn run(mut self, mut requests: mpsc::Receiver<Request>) {
        loop {
            let room = self.in_flight.len() < self.window;
            tokio::select! {
                biased;
                completed = sweep(&mut self.in_flight, &mut self.returned),
                    if !self.in_flight.is_empty() => self.decide(completed),
                request = requests.recv(), if room => match request {
                    Some(request) => {
                        self.send(request).await;
                        // Queue every request already waiting, up to the
                        // window, before lapin's io thread next writes:
                        // their frames go out together.
                        while self.in_flight.len() < self.window {
                            match requests.try_recv() {
                                Ok(request) => self.send(request).await,
                                Err(_) => break,
                            }
                        }
                    }
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
        let (id, channel) = match self.channel(deadline, &out.queue).await {
            Ok(opened) => opened,
            Err(e) => {
                self.answer(reply, Err(e));
                return;
            }
        };
        let Outgoing {
            queue,
            body,
            message_id,
            properties,
        } = out;
        let mut write: Write = Box::pin(async move {
            channel
                .basic_publish(
                    ShortString::default(),
                    routing_key,
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    &body,
                    properties,
                )
                .await
        });
        // The first poll takes the delivery tag and queues the frames, so
        // tags, frames and `sequence` follow the order of requests; the
        // write itself completes later, next to other publishes.
        let first = poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
        self.sequence += 1;
        let mut entry = InFlight {
            channel: id,
            sequence: self.sequence,
            stage: Stage::Writing(write),
            queue,
            message_id,
            reply,
        };
        match first {
            Poll::Pending => self.in_flight.push(entry),
            Poll::Ready(Ok(confirm)) => {
                entry.stage = Stage::Confirming(confirm);
                self.in_flight.push(entry);
            }
            Poll::Ready(Err(e)) => self.unwritten(entry, &e),
        }
    }

    /// Answers a publish whose frames were not written, and abandons its
    /// channel.
    fn unwritten(&mut self, entry: InFlight, e: &lapin::Error) {
        // Refused before anything was written (the channel or the
        // connection is not open) or failed while writing: either way this
        // channel is done.
        let unsent = matches!(
            e.kind(),
            lapin::ErrorKind::InvalidChannelState(..) | lapin::ErrorKind::InvalidConnectionState(_)
        );
        let what = format!("publishing to `{}`", entry.queue);
        let error = if unsent {
            lost(&what, e)
        } else {
            uncertain(&what, &e.to_string())
        };
        let id = entry.channel;
        self.answer(entry.reply, Err(error));
        self.abandon(id, &e.to_string());
    }

    /// The lane's channel and its number, opened (in confirm mode) on the
    /// current connection if there is none or it closed; waits for a
    /// reconnection until `deadline`.
    async fn channel(&mut self, deadline: Instant, queue: &str) -> Result<(u64, Channel), Error> {
        self.abandon_closed_refused();
        if let Some(open) = &self.channel {
            if open.channel.status().connected() {
                return Ok((open.id, open.channel.clone()));
            }
            // Closed under us: whatever is in flight on it is unknown.
            let id = open.id;
            self.abandon(id, "the publishing channel closed");
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
                self.opened += 1;
                let id = self.opened;
                self.channel = Some(Open {
                    id,
                    channel: channel.clone(),
                    current,
                });
                Ok((id, channel))
            }
            Err(e) => {
                if e.is_connection_lost() {
                    self.link.suspect(current.generation);
                }
                Err(e)
            }
        }
    }

    /// Answers the publishes a sweep found complete (rule 4), retires the
    /// channel if the broker refused one of them, and drops every channel
    /// one of them says failed.
    fn decide(&mut self, completed: Vec<(InFlight, Resolved)>) {
        let mut failed = Vec::new();
        let mut refused = false;
        for (entry, resolved) in completed {
            let returned = self.returned.remove(&entry.message_id);
            if matches!(resolved, Resolved::Nacked)
                && self.channel.as_ref().is_some_and(|c| c.id == entry.channel)
            {
                refused = true;
            }
            let outcome = match (returned, resolved) {
                (_, Resolved::Unwritten(e)) => {
                    self.unwritten(entry, &e);
                    continue;
                }
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
        if refused {
            self.retire();
        }
        while let Some((first, _)) = failed.first() {
            let id = first.channel;
            let (mine, rest) = failed.into_iter().partition(|(e, _)| e.channel == id);
            failed = rest;
            self.channel_failed(id, mine);
        }
        self.close_drained();
    }

    /// Stops sending on the current channel: the broker refused a publish
    /// on it. A quorum queue that refused a channel while over its length
    /// limit may go on refusing that channel after the limit is lifted
    /// (it tells a refused publisher to resume only when its length falls
    /// back under the limit), while a fresh channel is accepted at once.
    /// The next request opens a fresh channel; this one is closed once the
    /// publishes still in flight on it are decided.
    fn retire(&mut self) {
        if let Some(open) = self.channel.take() {
            tracing::debug!(
                channel = open.channel.id(),
                "the broker refused a publish; later publishes go on a fresh channel"
            );
            self.refused.push(open);
        }
    }

    /// Closes the refused channels with nothing left in flight.
    fn close_drained(&mut self) {
        let in_flight = &self.in_flight;
        self.refused.retain(|open| {
            let busy = in_flight.iter().any(|entry| entry.channel == open.id);
            if !busy {
                close(&open.channel);
            }
            busy
        });
    }

    /// Answers the publishes in flight on refused channels that closed
    /// under them (the connection died while they drained).
    fn abandon_closed_refused(&mut self) {
        let closed: Vec<u64> = self
            .refused
            .iter()
            .filter(|open| !open.channel.status().connected())
            .map(|open| open.id)
            .collect();
        for id in closed {
            self.abandon(id, "the publishing channel closed");
        }
    }

    /// A confirmation failed: channel `id` (or its connection) is gone. The
    /// publishes still in flight on it are answered and the channel
    /// dropped, together with every return lapin may still hold for it.
    ///
    /// When the broker closed only the channel (a refused publish: access
    /// refused, a message over the broker's size limit), the oldest publish
    /// in flight gets the broker's reason: it is the first the broker can
    /// have refused. Every other one is
    /// [`BackendErrorKind::Uncertain`](queuey_core::BackendErrorKind::Uncertain),
    /// and its caller publishes it again on a fresh channel.
    fn channel_failed(&mut self, id: u64, failed: Vec<(InFlight, lapin::Error)>) {
        let connection_alive = self
            .open(id)
            .is_some_and(|open| open.current.connection.status().connected());
        let mut failed = failed.into_iter();
        let Some((first, error)) = failed.next() else {
            return;
        };
        let failure = Failure::of(&error, connection_alive);
        let mut victims: Vec<InFlight> = std::iter::once(first)
            .chain(failed.map(|(entry, _)| entry))
            .chain(self.take_in_flight(id))
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
        self.drop_channel(id, failure.connection_lost);
    }

    /// Fails every publish in flight on channel `id` as
    /// [`BackendErrorKind::Uncertain`](queuey_core::BackendErrorKind::Uncertain)
    /// and drops the channel.
    fn abandon(&mut self, id: u64, why: &str) {
        for entry in self.take_in_flight(id) {
            let what = format!("publishing to `{}`", entry.queue);
            self.answer(entry.reply, Err(uncertain(&what, why)));
        }
        self.drop_channel(id, true);
    }

    /// Removes the publishes in flight on channel `id`, and the returns
    /// recorded for them.
    fn take_in_flight(&mut self, id: u64) -> Vec<InFlight> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|entry| entry.channel == id);
        self.in_flight = rest;
        for entry in &mine {
            self.returned.remove(&entry.message_id);
        }
        mine
    }

    /// The lane's channel numbered `id`, current or refused.
    fn open(&self, id: u64) -> Option<&Open> {
        self.channel
            .iter()
            .chain(&self.refused)
            .find(|open| open.id == id)
    }

    /// Forgets channel `id`; reports its connection to the supervisor when
    /// it looks lost.
    fn drop_channel(&mut self, id: u64, connection_suspect: bool) {
        let open = if self.channel.as_ref().is_some_and(|open| open.id == id) {
            self.channel.take()
        } else {
            let at = self.refused.iter().position(|open| open.id == id);
            at.map(|at| self.refused.swap_remove(at))
        };
        if let Some(open) = open {
            if connection_suspect {
                self.link.suspect(open.current.generation);
            }
            close(&open.channel);
        }
    }
}

/// Closes a channel that is still open, without waiting for the broker.
fn close(channel: &Channel) {
    if channel.status().connected() {
        let channel = channel.clone();
        tokio::spawn(async move {
            let _ = channel.close(200, ShortString::default()).await;
        });
    }
}
