//! A schedule's lease on RabbitMQ: its state message, held unacknowledged
//! by the queue's single active consumer.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use futures::StreamExt;
use futures::future::BoxFuture;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicGetOptions, BasicRejectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, Consumer};
use queuey_core::periodic::Lease;
use queuey_core::{BackendError, BackendErrorKind, Error};
use tokio::time::{Instant, timeout_at};

use super::state::State;
use super::status;
use super::{RECEIVE_BOUND, REFRESH_EVERY};
use crate::error::{Failure, backend};
use crate::topology::schedule_status_queue_name;
use crate::trust::{self, Kind, Refusal, Role, Senders};

/// The lease: the channel, its consumer, and the state message held.
pub(crate) struct RabbitLease {
    pub(super) queue: String,
    pub(super) channel: Channel,
    pub(super) consumer: Consumer,
    /// The state message held unacknowledged, and what it says.
    pub(super) held: Option<(Delivery, State)>,
    /// When the held state was last published.
    pub(super) published_at: Instant,
    /// The next tick and the schedule last announced, copied into the
    /// status queue with every state.
    pub(super) announced: Option<(Option<SystemTime>, String)>,
    /// Set by `release`, which closes the channel itself: a second close of
    /// the same channel would break the whole connection.
    pub(super) released: bool,
    /// Who signs the states published, and whose are believed.
    pub(super) senders: Arc<Senders>,
}

impl RabbitLease {
    fn state(&self) -> State {
        self.held.as_ref().map_or(State::new(None), |(_, s)| *s)
    }

    fn lost(&self, what: &str, why: impl fmt::Display) -> Error {
        let text = format!("{what} of schedule queue `{}`: {why}", self.queue);
        backend(BackendErrorKind::ConnectionLost, text)
    }

    fn failed(&self, what: &str, e: &lapin::Error) -> Error {
        Failure::of(e, self.channel.status().connected())
            .into_error(&format!("{what} of schedule queue `{}`", self.queue))
    }

    /// Folds a delivered state message into the held one: the one to keep
    /// stays unacknowledged, the other is acknowledged.
    pub(super) async fn fold(&mut self, delivery: Delivery) -> Result<(), Error> {
        let state = State::decode(&delivery.data);
        let state = match believe(&self.senders, &self.queue, &delivery.properties, state) {
            Ok(state) => state,
            Err(refusal) => {
                trust::refused(Kind::ScheduleState, &refusal);
                State::new(None)
            }
        };
        let keep_new = self.held.as_ref().is_none_or(|(_, s)| s.yields_to(&state));
        let drop = if keep_new {
            self.held.replace((delivery, state)).map(|(d, _)| d)
        } else {
            Some(delivery)
        };
        if let Some(old) = drop {
            old.acker
                .ack(BasicAckOptions::default())
                .await
                .map_err(|e| self.failed("acknowledging a state message", &e))?;
        }
        Ok(())
    }

    /// The latest believed tick the schedule's status queue records (its
    /// memory when the state message is gone). Every status message is
    /// read and handed back; the latest tick wins.
    pub(super) async fn recorded_in_status(&self) -> Result<Option<u64>, Error> {
        let status = schedule_status_queue_name(&self.queue);
        let mut latest: Option<u64> = None;
        let mut held = Vec::new();
        let outcome = async {
            for _ in 0..STATUS_READS {
                let got = self
                    .channel
                    .basic_get(
                        crate::properties::short(&status),
                        BasicGetOptions { no_ack: false },
                    )
                    .await
                    .map_err(|e| self.failed("reading the status", &e))?;
                let Some(message) = got else { break };
                let state = State::decode(&message.delivery.data);
                let properties = &message.delivery.properties;
                match believe(&self.senders, &self.queue, properties, state) {
                    Ok(state) => latest = latest.max(state.last_tick_ms),
                    Err(refusal) => trust::refused(Kind::ScheduleState, &refusal),
                }
                held.push(message.delivery.acker);
            }
            Ok::<_, Error>(())
        }
        .await;
        for acker in held {
            // Handed back in place; a failure leaves them to the channel's
            // close, which hands them back as well.
            let _ = acker.reject(BasicRejectOptions { requeue: true }).await;
        }
        outcome.map(|()| latest)
    }

    /// Becomes the leader for good, once every state was folded in:
    /// publishes the state again (with the status queue's last tick if
    /// later) and holds the fresh message, whose delivery count starts from
    /// none, so no number of leader changes reaches a delivery limit.
    pub(super) async fn take_over(&mut self) -> Result<(), Error> {
        let recorded = self.recorded_in_status().await?;
        let held = self.state().last_tick_ms;
        self.publish(State::at_ms(held.max(recorded))).await
    }

    /// The properties of a state or status message: JSON, persistent,
    /// signed when the backend knows its user.
    fn properties(&self) -> BasicProperties {
        self.senders.sign_if_known(
            BasicProperties::default()
                .with_content_type(ShortString::from("application/json"))
                .with_delivery_mode(2),
        )
    }

    /// How many state messages the schedule queue has ready, `what` naming
    /// the step in an error.
    async fn ready(&self, what: &str) -> Result<u32, Error> {
        let declared = crate::declare::passive(&self.channel, &self.queue)
            .await
            .map_err(|e| self.failed(what, &e))?;
        Ok(declared.message_count())
    }

    /// While waiting in line: if the schedule queue has no state message
    /// ready, publishes one with the last tick the status queue records. A
    /// leader folds it away; but when the state message is gone, the next
    /// consumer in line is active with nothing to receive, and only such a
    /// message tells it that it leads.
    pub(super) async fn probe(&self) -> Result<(), Error> {
        let ready = self.ready("checking the state messages").await?;
        if ready > 0 {
            return Ok(());
        }
        self.publish_recorded("publishing a probe").await
    }

    /// Publishes a state with the last tick the status queue records
    /// (none when it records none), confirmed, without waiting for it to
    /// come back: whoever is the active consumer receives it.
    pub(super) async fn publish_recorded(&self, what: &str) -> Result<(), Error> {
        let state = State::at_ms(self.recorded_in_status().await?);
        self.publish_confirmed(&self.queue, &state.encode(), self.properties(), what)
            .await
    }

    /// The next delivery on the consumer, until `deadline`: `Ok(None)` at
    /// the deadline; an error when the consumer is gone.
    pub(super) async fn next_until(
        &mut self,
        deadline: Instant,
    ) -> Result<Option<Delivery>, Error> {
        match timeout_at(deadline, self.consumer.next()).await {
            Err(_) => Ok(None),
            Ok(Some(Ok(delivery))) => Ok(Some(delivery)),
            Ok(Some(Err(e))) => Err(self.failed("consuming", &e)),
            Ok(None) => Err(self.lost("consuming", "the consumer was cancelled")),
        }
    }

    /// Checks by a round trip on the lease's channel, right before a tick,
    /// that the lease still holds: a process that hung past its heartbeat
    /// learns here that it lost it, instead of enqueueing the tick twice.
    async fn still_held(&mut self) -> Result<(), Error> {
        if !self.channel.status().connected() {
            return Err(self.lost("holding", "the channel is closed"));
        }
        let checking = crate::declare::passive(&self.channel, &self.queue);
        match timeout_at(Instant::now() + RECEIVE_BOUND, checking).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.failed("checking the lease", &e)),
            Err(_) => Err(self.lost("checking the lease", "the broker did not answer in time")),
        }
    }

    /// Takes in every state message the queue still has ready (two
    /// processes bootstrapped it, or a leader died between publishing a new
    /// state and acknowledging the old one), keeping the latest.
    pub(super) async fn take_in_the_rest(&mut self) -> Result<(), Error> {
        loop {
            // What the broker already pushed to us.
            while let Some(delivery) = self.next_until(Instant::now() + SETTLE_POLL).await? {
                self.fold(delivery).await?;
            }
            let ready = self.ready("counting the state messages").await?;
            if ready == 0 {
                return Ok(());
            }
            let deadline = Instant::now() + RECEIVE_BOUND;
            match self.next_until(deadline).await? {
                Some(delivery) => self.fold(delivery).await?,
                None => {
                    return Err(self.lost(
                        "taking in the state messages",
                        "the broker holds ready messages but delivers none; another consumer \
                         may be active",
                    ));
                }
            }
        }
    }

    /// Publishes `body` to `queue` on the lease's channel and waits for
    /// the broker's bare ack.
    async fn publish_confirmed(
        &self,
        queue: &str,
        body: &[u8],
        properties: BasicProperties,
        what: &str,
    ) -> Result<(), Error> {
        let confirm = self
            .channel
            .basic_publish(
                ShortString::default(),
                crate::properties::short(queue),
                crate::channel::MANDATORY,
                body,
                properties,
            )
            .await
            .map_err(|e| self.failed(what, &e))?;
        let confirmation = timeout_at(Instant::now() + RECEIVE_BOUND, confirm)
            .await
            .map_err(|_| self.lost(what, "no confirmation in time"))?
            .map_err(|e| self.failed(what, &e))?;
        match confirmation {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(_)) => Err(Error::Backend(BackendError::new(
                BackendErrorKind::Unroutable,
                format!(
                    "{what} of schedule queue `{}`: the queue `{queue}` is gone; it is declared \
                     again when a leader is elected",
                    self.queue
                ),
            ))),
            Confirmation::Nack(_) | Confirmation::NotRequested => {
                Err(self.lost(what, "the broker refused it"))
            }
        }
    }

    /// Copies the state held and what was announced into the status queue.
    async fn publish_status(&self) -> Result<(), Error> {
        let Some((next, schedule)) = &self.announced else {
            return Ok(());
        };
        let body = status::encode(self.state().last_tick(), *next, schedule);
        self.publish_confirmed(
            &schedule_status_queue_name(&self.queue),
            &body,
            self.properties(),
            "publishing the status",
        )
        .await
    }

    /// Publishes `state` (confirmed), then receives it back (this process
    /// is the queue's active consumer, so it comes here) and folds it in,
    /// which acknowledges the state held before.
    async fn publish(&mut self, state: State) -> Result<(), Error> {
        let id = queuey_core::Uuid::new_v4().to_string();
        let properties = self
            .properties()
            .with_message_id(ShortString::from(id.as_str()));
        let queue = self.queue.clone();
        self.publish_confirmed(&queue, &state.encode(), properties, "publishing the state")
            .await?;
        self.published_at = Instant::now();
        let deadline = Instant::now() + RECEIVE_BOUND;
        loop {
            let Some(delivery) = self.next_until(deadline).await? else {
                return Err(self.lost(
                    "receiving the state back",
                    "it did not come back in time; another consumer may be active",
                ));
            };
            let ours = delivery
                .properties
                .message_id()
                .as_ref()
                .is_some_and(|m| m.as_str() == id);
            self.fold(delivery).await?;
            if ours {
                return self.publish_status().await;
            }
        }
    }
}

/// A state message (or a status, read as one), if believed: from a trusted
/// worker user, its last tick not in the future (beyond clock skew).
/// Callers count one not believed as "never fired".
fn believe(
    senders: &Senders,
    queue: &str,
    properties: &BasicProperties,
    state: State,
) -> Result<State, Refusal> {
    senders.admit(Role::Worker, properties)?;
    let now = queuey_core::__private::now_ms();
    match state.last_tick_ms {
        Some(tick) if queuey_core::control::is_ahead(tick, now) => Err(Refusal::Invalid(format!(
            "the schedule state of `{queue}` says its last tick was at {tick} ms since the epoch, \
             after this host's clock ({now})"
        ))),
        _ => Ok(state),
    }
}

/// The most status messages read when recovering a last tick.
const STATUS_READS: usize = 8;

/// How long to wait for more deliveries the broker may have pushed already.
const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(50);

impl fmt::Debug for RabbitLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitLease")
            .field("queue", &self.queue)
            .field("last_tick", &self.state().last_tick())
            .finish_non_exhaustive()
    }
}

impl Lease for RabbitLease {
    fn last_tick(&self) -> Option<SystemTime> {
        self.state().last_tick()
    }

    fn hold_until<'a>(&'a mut self, deadline: Instant) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            loop {
                let refresh = self.published_at + REFRESH_EVERY;
                if refresh <= Instant::now() {
                    // Well within the broker's consumer timeout, the state
                    // held becomes a fresh message.
                    self.publish(self.state()).await?;
                    continue;
                }
                let until = deadline.min(refresh);
                match self.next_until(until).await? {
                    Some(delivery) => self.fold(delivery).await?,
                    None if until == deadline => return self.still_held().await,
                    None => {}
                }
            }
        })
    }

    fn record<'a>(&'a mut self, tick: SystemTime) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let last = self.state().last_tick().map_or(tick, |l| l.max(tick));
            self.publish(State::new(Some(last))).await
        })
    }

    fn announce<'a>(
        &'a mut self,
        next_tick: Option<SystemTime>,
        schedule: &'a str,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.announced = Some((next_tick, schedule.to_owned()));
            self.publish_status().await
        })
    }

    fn release(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        self.released = true;
        let channel = self.channel.clone();
        drop(self);
        Box::pin(async move {
            // Closing the channel hands the held state back to the queue,
            // and the next consumer in line becomes active with it.
            if channel.status().connected() {
                let closing = channel.close(200, ShortString::default());
                let _ = tokio::time::timeout(RECEIVE_BOUND, closing).await;
            }
        })
    }
}

impl Drop for RabbitLease {
    fn drop(&mut self) {
        // A lease dropped without `release` (its task aborted) must not
        // keep the schedule: close the channel in the background.
        if !self.released {
            crate::channel::close_later(&self.channel);
        }
    }
}
