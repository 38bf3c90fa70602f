//! The task owning one lane: its channel, the publishes in flight, and the
//! channels it stopped using after the broker refused a publish on them.
//! How it opens, retires and drops those channels is in `channels`.

mod channels;

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use lapin::Channel;
use lapin::types::ShortString;
use queuey_core::Error;
use tokio::sync::{mpsc, oneshot};

use super::confirms::{InFlight, Resolved, Returned, Stage, Write, lost, sweep, uncertain};
use super::{Outgoing, Request};
use crate::error::{Confirmed, confirm_outcome, never_sent};
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
            exchange,
            queue,
            body,
            message_id,
            properties,
        } = out;
        let mut write: Write = Box::pin(async move {
            channel
                .basic_publish(
                    exchange.unwrap_or_default(),
                    routing_key,
                    crate::channel::MANDATORY,
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
        let what = format!("publishing to `{}`", entry.queue);
        let error = if never_sent(e) {
            lost(&what, e)
        } else {
            uncertain(&what, &e.to_string())
        };
        let id = entry.channel;
        self.answer(entry.reply, Err(error));
        self.abandon(id, &e.to_string());
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
            let confirmed = match (returned, resolved) {
                (_, Resolved::Unwritten(e)) => {
                    self.unwritten(entry, &e);
                    continue;
                }
                (_, Resolved::Failed(e)) => {
                    failed.push((entry, e));
                    continue;
                }
                (Some(returned), _) => Confirmed::Returned {
                    message_id: Some(entry.message_id.clone()),
                    reply_code: returned.reply_code,
                    reply_text: returned.reply_text,
                },
                (None, Resolved::Acked) => Confirmed::Ack,
                (None, Resolved::Nacked) => Confirmed::Nack,
                (None, Resolved::NotRequested) => Confirmed::NotRequested,
            };
            let outcome = confirm_outcome(&entry.queue, &entry.message_id, confirmed);
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
}
