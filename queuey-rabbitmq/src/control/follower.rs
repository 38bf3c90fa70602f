//! The follower: one task per backend reading the control stream in order,
//! applying each command to the backend's view, across connections.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::BasicAckOptions;
use queuey_core::Error;
use queuey_core::backend::ConnectionState;
use queuey_core::control::{CANCELLATION_MEMORY, Command, ControlRecord, ControlView};
use tokio::time::{Interval, MissedTickBehavior};

use super::live::{self, Live, PREFETCH};
use super::message::{self, Read};
use super::metric;
use super::renew::{self, Resumes};
use super::syncs::Syncs;
use crate::link::Link;
use crate::outbox::Outbox;
use crate::trust::{self, Kind, Refusal, Role, Senders};

/// Acknowledge at least every this many records (a stream's
/// acknowledgements are only credit for the broker to send more).
const ACK_EVERY: u64 = PREFETCH as u64 / 4;
/// How often the follower forgets old cancellations and looks for pauses
/// to renew, besides right after it first caught up.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(3_600);
/// The first pause before consuming again after the consumer was lost; it
/// doubles on every loss in a row, up to [`RESUME_PAUSE_MAX`].
const RESUME_PAUSE_MIN: Duration = Duration::from_millis(50);
const RESUME_PAUSE_MAX: Duration = Duration::from_secs(2);
/// The longest pause between tries after the broker refused the stream.
const REFUSED_PAUSE_MAX: Duration = Duration::from_secs(30);

/// One backend's follower of its control stream.
pub(super) struct Follower {
    pub(super) link: Arc<Link>,
    pub(super) outbox: Arc<Outbox>,
    pub(super) stream: Arc<str>,
    /// Who this process says it is, in the pauses it renews.
    pub(super) by: Option<Arc<str>>,
    /// Whose commands are obeyed, and who signs renewals.
    pub(super) senders: Arc<Senders>,
    pub(super) view: ControlView,
    pub(super) syncs: Arc<Syncs>,
    /// The offset of the next record: every one before it was read.
    /// `None` until the first is read.
    next: Option<u64>,
    resumes: Resumes,
    /// Whether the follower read one of its own sync markers yet.
    caught_up: bool,
    /// Whether the gauges are behind the view.
    dirty: bool,
    pause: Duration,
}

/// How following one connection ended.
enum Ended {
    /// The consumer was lost (or the stream deleted): consume again.
    Lost,
    /// The backend was closed.
    Closed,
}

impl Follower {
    pub(super) fn new(
        link: Arc<Link>,
        outbox: Arc<Outbox>,
        stream: Arc<str>,
        by: Option<Arc<str>>,
        senders: Arc<Senders>,
        view: ControlView,
        syncs: Arc<Syncs>,
    ) -> Self {
        Follower {
            link,
            outbox,
            stream,
            by,
            senders,
            view,
            syncs,
            next: None,
            resumes: Resumes::default(),
            caught_up: false,
            dirty: false,
            pause: RESUME_PAUSE_MIN,
        }
    }

    /// Follows the stream from `live` on, consuming again after every
    /// loss from the offset after the last record read, until the backend
    /// closes or cannot consume the stream any more.
    pub(super) async fn run(mut self, first: Live) {
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_EVERY);
        housekeeping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // The first tick is at once; the first housekeeping waits until the
        // follower has caught up.
        housekeeping.tick().await;
        let mut live = first;
        let reason = loop {
            if let Ended::Closed = self.follow(&mut live, &mut housekeeping).await {
                break "the backend was closed".to_owned();
            }
            metrics::counter!(metric::FOLLOWER_RESTARTS).increment(1);
            live = match self.restart().await {
                Ok(live) => live,
                Err(reason) => break reason,
            };
        };
        self.syncs.end(&reason);
    }

    /// Reads `live` until it ends.
    async fn follow(&mut self, live: &mut Live, housekeeping: &mut Interval) -> Ended {
        let gone = self.link.gone(live.generation);
        tokio::pin!(gone);
        // The last delivery read and not acknowledged, and how many.
        let mut unacked: Option<u64> = None;
        let mut count = 0u64;
        loop {
            let item = match live.consumer.next().now_or_never() {
                Some(item) => item,
                None => {
                    // Nothing more buffered: acknowledge what was read and
                    // bring the gauges up to date before waiting.
                    if let Some(tag) = unacked.take() {
                        acknowledge(live, tag).await;
                        count = 0;
                    }
                    self.gauges();
                    tokio::select! {
                        item = live.consumer.next() => item,
                        _ = housekeeping.tick() => {
                            self.housekeep();
                            continue;
                        }
                        () = &mut gone => None,
                    }
                }
            };
            match item {
                Some(Ok(delivery)) => {
                    self.pause = RESUME_PAUSE_MIN;
                    unacked = Some(delivery.delivery_tag);
                    count += 1;
                    self.read(delivery);
                    if count >= ACK_EVERY
                        && let Some(tag) = unacked.take()
                    {
                        acknowledge(live, tag).await;
                        count = 0;
                    }
                }
                Some(Err(error)) => {
                    if self.link.is_closed() {
                        return Ended::Closed;
                    }
                    tracing::warn!(stream = %self.stream, %error, "the control stream's consumer was lost; following again once the connection is back");
                    self.link.suspect(live.generation);
                    return Ended::Lost;
                }
                None => {
                    if self.link.is_closed() {
                        return Ended::Closed;
                    }
                    if live.channel.status().connected()
                        && self
                            .link
                            .current()
                            .is_some_and(|c| c.generation == live.generation)
                    {
                        // We never cancel the consumer: the broker did, so
                        // the stream was deleted. A new one counts from 0.
                        tracing::warn!(stream = %self.stream, "the broker cancelled the control stream's consumer (was the stream deleted?); forgetting what was read from it, declaring it again and following it from its start");
                        self.rebuild();
                    } else {
                        tracing::warn!(stream = %self.stream, "the control stream's channel closed; following again once the connection is back");
                        self.link.suspect(live.generation);
                    }
                    return Ended::Lost;
                }
            }
        }
    }

    /// Forgets everything read from a stream that was deleted or replaced:
    /// the view starts empty and fills again from the new stream's start.
    fn rebuild(&mut self) {
        self.view.reset();
        self.next = None;
        self.resumes.clear();
        self.dirty = true;
    }

    /// Applies one delivery, in stream order; skips what was read before,
    /// and refuses (counting it) a command from a sender it does not
    /// trust or that breaks a rule of
    /// [`ControlRecord::check`].
    fn read(&mut self, delivery: Delivery) {
        let offset = message::offset(&delivery.properties);
        if let (Some(offset), Some(next)) = (offset, self.next)
            && offset < next
        {
            return;
        }
        match message::read(&delivery.properties, &delivery.data) {
            Read::Sync(nonce) => {
                if self.syncs.reached(nonce) && !self.caught_up {
                    self.caught_up = true;
                    self.housekeep();
                }
            }
            Read::Record {
                record,
                renews_after,
            } => {
                let role = if renews_after.is_some() {
                    Role::Renewal
                } else {
                    Role::Control
                };
                let admitted = self
                    .senders
                    .admit(role, &delivery.properties)
                    .and_then(|()| {
                        record
                            .check_content(queuey_core::__private::now_ms())
                            .map_err(Refusal::from)
                    });
                if let Err(refusal) = &admitted {
                    trust::refused(Kind::Command, refusal);
                } else if self.resumes.accepts(&record, renews_after) {
                    self.view.apply(&record);
                    self.dirty = true;
                    metrics::counter!(metric::RECORDS).increment(1);
                } else {
                    tracing::debug!(record = %record.id, "a renewed pause came after a resume of its queue; ignored");
                }
                if admitted.is_ok() {
                    self.resumes.read(&record, offset);
                }
            }
            Read::TooLarge(bytes) => trust::refused(Kind::Command, &Refusal::TooLarge(bytes)),
            Read::Skip => {
                tracing::debug!(stream = %self.stream, ?offset, "skipped a message of the control stream that is not a command this version knows");
            }
        }
        if let Some(offset) = offset {
            self.next = Some(offset + 1);
        }
    }

    /// Forgets cancellations past their memory, renews pauses a week old,
    /// and updates the gauges.
    fn housekeep(&mut self) {
        let now = queuey_core::__private::now_ms();
        let memory = u64::try_from(CANCELLATION_MEMORY.as_millis()).unwrap_or(u64::MAX);
        self.view.forget_before(now.saturating_sub(memory));
        self.dirty = true;
        let state = self.view.snapshot();
        let after = self.next.map_or(0, |next| next.saturating_sub(1));
        for (queue, paused_at_ms) in renew::due(&state, now) {
            let by = match &self.by {
                Some(by) => format!("{by}, renewing a pause of {paused_at_ms} ms"),
                None => format!("renewing a pause of {paused_at_ms} ms"),
            };
            let record = ControlRecord::new(Command::Pause {
                queue: queue.clone(),
            })
            .by(by);
            let mut out = message::renewal(&self.stream, &record, after);
            match self.senders.sign(out.properties, "renewing a pause") {
                Ok(signed) => out.properties = signed,
                Err(error) => {
                    tracing::warn!(queue, %error, "cannot renew a pause a week old");
                    continue;
                }
            }
            let outbox = Arc::clone(&self.outbox);
            tokio::spawn(async move {
                match outbox.control(out).await {
                    Ok(()) => {
                        metrics::counter!(metric::PAUSE_RENEWALS).increment(1);
                        tracing::info!(
                            queue,
                            paused_at_ms,
                            "renewed a pause a week old, so the control stream keeps it"
                        );
                    }
                    Err(error) => {
                        tracing::warn!(queue, %error, "could not renew a pause a week old; trying again at the next look");
                    }
                }
            });
        }
        self.gauges();
    }

    /// Sets the gauges from the view, if anything changed.
    fn gauges(&mut self) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let state = self.view.snapshot();
        let (by_id, by_filter) = state.cancellations();
        metrics::gauge!(metric::CANCELLATIONS).set((by_id + by_filter) as f64);
        metrics::gauge!(metric::PAUSED_QUEUES).set(state.paused().count() as f64);
    }

    /// Consumes again on the connection of the moment, from the offset
    /// after the last record read. Keeps trying while the backend lives,
    /// longer apart after a refusal (a stream an operator declared
    /// otherwise: it heals once fixed); `Err` with the reason once the
    /// backend is closed or gave up.
    async fn restart(&mut self) -> Result<Live, String> {
        let mut refused = false;
        loop {
            if self.link.is_closed() {
                return Err("the backend was closed".to_owned());
            }
            if self.link.state() == ConnectionState::Failed {
                return Err("the backend gave up on RabbitMQ".to_owned());
            }
            tokio::time::sleep(self.pause).await;
            let longest = if refused {
                REFUSED_PAUSE_MAX
            } else {
                RESUME_PAUSE_MAX
            };
            self.pause = (self.pause * 2).min(longest);
            if let Some(next) = self.next {
                match self.tail().await {
                    Ok(Some(tail)) if tail < next => {
                        tracing::warn!(stream = %self.stream, read_up_to = next, tail, "the control stream was deleted and declared again since it was last read; forgetting what was read from the old one and following the new one from its start");
                        self.rebuild();
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::debug!(stream = %self.stream, %error, "cannot look at the control stream's end yet; trying again");
                        continue;
                    }
                }
            }
            match live::start(&self.link, &self.stream, self.next).await {
                Ok(live) => {
                    tracing::info!(stream = %self.stream, from = ?self.next, "following control commands again");
                    return Ok(live);
                }
                Err(Error::ShutDown) => return Err("the backend was closed".to_owned()),
                Err(error) if live::try_again(&error) => {
                    tracing::debug!(stream = %self.stream, %error, "cannot follow control commands yet; trying again");
                }
                Err(error) if !refused => {
                    refused = true;
                    tracing::error!(stream = %self.stream, %error, "cannot follow control commands; the control state stays as it was until this is fixed (trying again)");
                }
                Err(error) => {
                    tracing::warn!(stream = %self.stream, %error, retry_in = ?self.pause, "still cannot follow control commands");
                }
            }
        }
    }
}

impl Follower {
    /// The offset at the stream's end now: a marker is published, and read
    /// back by a consumer of the stream's last chunk. A stream deleted and
    /// declared again counts from 0, so an end before the offsets already
    /// read means the stream is not the one read before.
    async fn tail(&self) -> Result<Option<u64>, Error> {
        let nonce = uuid::Uuid::new_v4();
        let mut marker = message::sync_marker(&self.stream, nonce);
        marker.properties = self.senders.sign_if_known(marker.properties);
        self.outbox.control(marker).await?;
        live::offset_of(&self.link, &self.stream, nonce).await
    }
}

/// Acknowledges every delivery up to `tag` on the stream's channel. A
/// failure means the channel is gone, which the consumer reports itself.
async fn acknowledge(live: &Live, tag: u64) {
    let multiple = BasicAckOptions { multiple: true };
    if let Err(error) = live.channel.basic_ack(tag, multiple).await {
        tracing::debug!(%error, "could not acknowledge control records; the channel is gone");
    }
}
