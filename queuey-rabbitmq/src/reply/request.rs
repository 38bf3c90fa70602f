//! The requester's side: the request channel, publishing a job a caller
//! waits for, and reading the replies that come back on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use lapin::options::BasicConsumeOptions;
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Confirmation};
use queuey_core::backend::{PendingReply, Reply, ReplyLost, ReplyTo};
use queuey_core::{Envelope, Error};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::DIRECT_REPLY_TO;
use super::waiting::Waiting;
use crate::RabbitMqOptions;
use crate::bound::timed_out;
use crate::error::{self, Confirmed, Failure};
use crate::link::Link;
use crate::outbox::prepare::Prepared;
use crate::trust::{self, Kind, Refusal, Role, Senders};
use crate::{channel, properties};

/// Why every caller waiting on a request channel is told its reply cannot
/// come.
const CHANNEL_LOST: &str = "the channel its reply was to come back on closed (the connection to \
                            RabbitMQ dropped, or the backend was closed), and RabbitMQ drops a \
                            reply to a closed channel";

/// The step of opening the request channel, as errors name it.
const OPENING: &str = "opening the channel for callers that wait for results";

/// The request channel of a backend, opened on the first wait.
pub(crate) struct Requests {
    link: Arc<Link>,
    options: Arc<RabbitMqOptions>,
    waiting: Arc<Waiting>,
    /// Held across each publish and its confirm: one request in flight, so
    /// a returned message is always the one just published.
    channel: Mutex<Option<Open>>,
    opened: AtomicU64,
    /// Whose replies are believed.
    senders: Arc<Senders>,
}

/// An open request channel and the task reading its replies.
struct Open {
    id: u64,
    channel: Channel,
    generation: u64,
    reader: JoinHandle<()>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Requests {
    /// Requests on `link`; nothing is opened until the first one.
    pub(crate) fn new(
        link: &Arc<Link>,
        options: &Arc<RabbitMqOptions>,
        senders: &Arc<Senders>,
    ) -> Self {
        Requests {
            link: Arc::clone(link),
            options: Arc::clone(options),
            waiting: Arc::new(Waiting::default()),
            channel: Mutex::new(None),
            opened: AtomicU64::new(0),
            senders: Arc::clone(senders),
        }
    }

    /// Publishes `envelope` to its queue with a reply address on the
    /// request channel and waits for the broker's confirm; the reply comes
    /// through the returned [`PendingReply`].
    pub(crate) async fn request(&self, mut envelope: Envelope) -> Result<PendingReply, Error> {
        self.link.ensure_open()?;
        let correlation_id = uuid::Uuid::new_v4().to_string();
        envelope.reply_to = Some(ReplyTo::new(DIRECT_REPLY_TO, correlation_id.clone()));
        let queue = envelope.queue.clone();
        let declared = self.link.declared.get(&queue);
        let limit = self.options.settings().max_message_size();
        let mut out = Prepared::new(&envelope, limit, declared.as_deref())?.outgoing(&queue);
        out.exchange = self.options.job_route();
        let deadline = Instant::now() + self.options.publish_timeout;
        let what = format!("publishing a job to `{queue}` for a caller that waits for it");
        let mut slot = self.channel.lock().await;
        loop {
            let (id, channel, generation) = self.channel(&mut slot, deadline, &what).await?;
            let Some((receiver, progress)) = self.waiting.register(id, &correlation_id) else {
                // Its reader saw it close just now: open another.
                self.retire(&mut slot);
                continue;
            };
            let forget = Forget {
                waiting: Arc::clone(&self.waiting),
                correlation_id: correlation_id.clone(),
            };
            let publish = channel.basic_publish(
                out.exchange.clone().unwrap_or_default(),
                properties::short(&queue),
                crate::channel::MANDATORY,
                &out.body,
                out.properties.clone(),
            );
            let confirmed = tokio::time::timeout_at(deadline, async {
                match publish.await {
                    Ok(confirm) => confirm.await.map_err(|e| (e, true)),
                    Err(e) => Err((e, false)),
                }
            })
            .await;
            let outcome = match confirmed {
                Err(_) => {
                    // Its confirm (or return) may still come, and must not
                    // be taken for the next request's.
                    self.retire(&mut slot);
                    Err(timed_out(&what, self.options.publish_timeout))
                }
                Ok(Ok(confirmation)) => {
                    let confirmed = confirmed_as(confirmation);
                    let outcome = error::confirm_outcome(&queue, &out.message_id, confirmed);
                    let exchange = self.options.settings().job_exchange();
                    let hint =
                        |e| error::with_no_route_hint(e, &queue, declared.is_some(), exchange);
                    outcome.map_err(hint)
                }
                Ok(Err((e, sent))) => {
                    let alive = channel.status().connected();
                    self.retire(&mut slot);
                    if !sent && error::never_sent(&e) && Instant::now() < deadline {
                        // Nothing left: try again on a fresh channel.
                        continue;
                    }
                    let failure = Failure::of(&e, alive).into_error(&what);
                    self.link.saw(generation, &failure);
                    Err(failure)
                }
            };
            drop(slot);
            return outcome.map(|()| {
                PendingReply::new(async move {
                    let _forget = forget;
                    receiver
                        .await
                        .unwrap_or_else(|_| Err(ReplyLost::new("the backend was dropped")))
                })
                .with_progress(progress)
            });
        }
    }

    /// The request channel, opened (confirm mode, reply consumer, reader
    /// task) if there is none or its connection is gone.
    async fn channel(
        &self,
        slot: &mut Option<Open>,
        deadline: Instant,
        what: &str,
    ) -> Result<(u64, Channel, u64), Error> {
        if let Some(open) = slot.as_ref() {
            let current = self.link.current().map(|c| c.generation);
            if open.channel.status().connected() && current == Some(open.generation) {
                return Ok((open.id, open.channel.clone(), open.generation));
            }
            self.retire(slot);
        }
        let current = self.link.connection_until(deadline, what).await?;
        let connection = Arc::clone(&current.connection);
        let fail =
            |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(OPENING);
        let id = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        let opening = async {
            let channel = channel::open_confirmed(&connection, OPENING).await?;
            let consumer = channel
                .basic_consume(
                    ShortString::from(DIRECT_REPLY_TO),
                    properties::short(&format!("queuey.replies.{id}")),
                    BasicConsumeOptions {
                        no_ack: true,
                        ..BasicConsumeOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(fail)?;
            Ok::<_, Error>((channel, consumer))
        };
        let (channel, consumer) = match tokio::time::timeout_at(deadline, opening).await {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => {
                self.link.saw(current.generation, &e);
                return Err(e);
            }
            Err(_) => return Err(timed_out(OPENING, self.options.publish_timeout)),
        };
        self.waiting.opened(id);
        let reader = tokio::spawn(read(
            consumer,
            id,
            Arc::clone(&self.waiting),
            Arc::clone(&self.senders),
            self.options.settings().max_message_size(),
            self.link.gone(current.generation),
        ));
        *slot = Some(Open {
            id,
            channel: channel.clone(),
            generation: current.generation,
            reader,
        });
        Ok((id, channel, current.generation))
    }

    /// Stops using the request channel in `slot`: every caller waiting on
    /// it is told its reply cannot come, and the channel is closed.
    fn retire(&self, slot: &mut Option<Open>) {
        let Some(open) = slot.take() else { return };
        self.waiting.lost(open.id, CHANNEL_LOST);
        channel::close_later(&open.channel);
    }

    /// Closes the request channel: every caller still waiting is told its
    /// reply cannot come.
    /// The channel itself goes with the connection, which the backend
    /// closes next.
    pub(crate) async fn close(&self) {
        if let Some(open) = self.channel.lock().await.take() {
            self.waiting.lost(open.id, CHANNEL_LOST);
        }
    }
}

/// Reads the replies of request channel `id` until it closes or its
/// connection is `gone`, then tells every caller still waiting on it. A
/// reply is believed only from a trusted worker user and within
/// `max_bytes`; another is dropped (and counted), and the caller keeps
/// waiting for the real one.
async fn read(
    mut consumer: lapin::Consumer,
    id: u64,
    waiting: Arc<Waiting>,
    senders: Arc<Senders>,
    max_bytes: usize,
    gone: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(gone);
    loop {
        let delivery = tokio::select! {
            delivery = consumer.next() => delivery,
            () = &mut gone => break,
        };
        let delivery = match delivery {
            Some(Ok(delivery)) => delivery,
            Some(Err(error)) => {
                tracing::debug!(%error, "the channel of waiting callers closed");
                break;
            }
            None => break,
        };
        let Some(correlation_id) = delivery.properties.correlation_id().as_ref() else {
            tracing::debug!("a reply without a correlation id; dropped");
            continue;
        };
        let size = delivery.data.len();
        let admitted = match senders.admit(Role::Worker, &delivery.properties) {
            Ok(()) if size > max_bytes => Err(Refusal::TooLarge(size)),
            admitted => admitted,
        };
        if let Err(refusal) = admitted {
            trust::refused(Kind::Reply, &refusal);
            continue;
        }
        let reply = Reply::decode(&delivery.data).unwrap_or_else(|e| {
            Reply::NoValue(format!("the reply did not decode as a job result: {e}"))
        });
        waiting.resolve(correlation_id.as_str(), reply);
    }
    waiting.lost(id, CHANNEL_LOST);
}

/// What a lapin confirmation said.
fn confirmed_as(confirmation: Confirmation) -> Confirmed {
    let returned = |message: lapin::message::BasicReturnMessage| Confirmed::Returned {
        message_id: message
            .delivery
            .properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned()),
        reply_code: message.reply_code,
        reply_text: message.reply_text.as_str().to_owned(),
    };
    match confirmation {
        Confirmation::Ack(None) => Confirmed::Ack,
        Confirmation::Ack(Some(message)) | Confirmation::Nack(Some(message)) => returned(message),
        Confirmation::Nack(None) => Confirmed::Nack,
        Confirmation::NotRequested => Confirmed::NotRequested,
    }
}

/// Forgets a caller that stopped waiting, so a later reply is dropped.
struct Forget {
    waiting: Arc<Waiting>,
    correlation_id: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.waiting.forget(&self.correlation_id);
    }
}
