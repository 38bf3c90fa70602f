//! The follower: one task per backend reading the control stream in order,
//! applying each command to the backend's view, across connections.
//!
//! It starts by seeking (`seek`): reading the stream's last records for a
//! snapshot of the state from a trusted sender, applying nothing. The first
//! one found replaces the view, and the follower consumes again from the
//! offset after the snapshot's. Reaching its own sync marker without one
//! means there is none that recent (a young stream, a fleet that was
//! down): it consumes again from the stream's first record.
//! Once caught up, the follower takes its turn writing snapshots: one
//! whenever none was read for an interval (each follower looks at a time
//! of its own within the interval, so a fleet writes about one).

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::BasicAckOptions;
use queuey_core::Error;
use queuey_core::backend::ConnectionState;
use queuey_core::control::{CANCELLATION_MEMORY, Command, ControlRecord, ControlView};
use tokio::time::{Interval, MissedTickBehavior};

use super::live::{self, Live, PREFETCH, StartAt};
use super::message::{self, Read};
use super::metric;
use super::renew::{self, Resumes};
use super::seek::Seek;
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
/// At least how many refused records (a flood from an untrusted user) make
/// a follower write a snapshot at once, so a flood never pushes every
/// snapshot out of the stream's bound; each draws its own number up to
/// twice this, so a fleet does not write at once.
const SNAPSHOT_AFTER_REFUSALS: u64 = 10_000;

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
    /// While seeking a snapshot: where. Nothing is applied meanwhile.
    seeking: Option<Seek>,
    /// How often a snapshot is written.
    snapshot_interval: Duration,
    /// When the last snapshot read or written was taken (milliseconds
    /// since the Unix epoch).
    last_snapshot_ms: Option<u64>,
    /// Whether a state too large to snapshot was reported already.
    too_large_told: bool,
    /// Records refused since the last snapshot read or written.
    refused: u64,
    /// How many refusals make this follower write a snapshot at once.
    refusals_for_snapshot: u64,
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
    /// The follower moved: it found a snapshot to go on from, or found
    /// none and reads from the stream's start. Consume again from there.
    Moved,
    /// The backend was closed.
    Closed,
}

impl Follower {
    /// The follower of `control`'s stream on `link`, applying to `view`,
    /// telling `syncs`, seeking a snapshot as `seek` says and writing one
    /// every `interval`.
    pub(super) fn new(
        control: &super::Control,
        link: Arc<Link>,
        view: ControlView,
        syncs: Arc<Syncs>,
        seek: Option<Seek>,
        interval: Duration,
    ) -> Self {
        Follower {
            link,
            outbox: Arc::clone(&control.outbox),
            stream: Arc::clone(&control.stream),
            by: control.by.clone(),
            senders: Arc::clone(&control.senders),
            view,
            syncs,
            next: None,
            seeking: seek,
            snapshot_interval: interval,
            last_snapshot_ms: None,
            too_large_told: false,
            refused: 0,
            refusals_for_snapshot: SNAPSHOT_AFTER_REFUSALS
                + crate::link::random_below(SNAPSHOT_AFTER_REFUSALS),
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
        // Each follower looks for a snapshot to write at a time of its own
        // within the interval, so that a fleet started at once takes turns.
        let interval = self.snapshot_interval;
        let first_look = tokio::time::Instant::now() + crate::link::jitter(interval);
        let mut snapshots = tokio::time::interval_at(first_look, interval);
        snapshots.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut live = first;
        let reason = loop {
            let moved = match self
                .follow(&mut live, &mut housekeeping, &mut snapshots)
                .await
            {
                Ended::Closed => break "the backend was closed".to_owned(),
                Ended::Lost => {
                    metrics::counter!(metric::FOLLOWER_RESTARTS).increment(1);
                    false
                }
                Ended::Moved => {
                    crate::channel::close(&live.channel).await;
                    true
                }
            };
            live = match self.restart(moved).await {
                Ok(live) => live,
                Err(reason) => break reason,
            };
        };
        self.syncs.end(&reason);
    }

    /// Reads `live` until it ends, keeping house and writing snapshots on
    /// the timers' ticks.
    async fn follow(
        &mut self,
        live: &mut Live,
        housekeeping: &mut Interval,
        snapshots: &mut Interval,
    ) -> Ended {
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
                        _ = snapshots.tick() => {
                            self.snapshot_if_due();
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
                    if let Step::Move = self.read(delivery) {
                        return Ended::Moved;
                    }
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
        self.seeking = None;
        self.resumes.clear();
        self.dirty = true;
    }

    /// Applies one delivery in stream order, skipping what was read before
    /// and refusing (counting) a command from an untrusted sender or one
    /// that breaks [`ControlRecord::check`]; while seeking, only seeks.
    fn read(&mut self, delivery: Delivery) -> Step {
        if self.seeking.is_some() {
            return self.seek(&delivery);
        }
        let offset = message::offset(&delivery.properties);
        if let (Some(offset), Some(next)) = (offset, self.next)
            && offset < next
        {
            return Step::On;
        }
        match message::read(&delivery.properties, &delivery.data) {
            Read::Snapshot { at_ms, .. } => {
                // The view holds the state already: a snapshot only says
                // that a follower wrote one, so this one waits its turn.
                let trusted = self.senders.admit(Role::Renewal, &delivery.properties);
                if trusted.is_ok() {
                    self.saw_snapshot(at_ms);
                }
            }
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
                let role = renews_after.map_or(Role::Control, |_| Role::Renewal);
                let now = queuey_core::__private::now_ms();
                let admitted = self.senders.admit(role, &delivery.properties);
                let admitted =
                    admitted.and_then(|()| record.check_content(now).map_err(Refusal::from));
                if let Err(refusal) = &admitted {
                    trust::refused(Kind::Command, refusal);
                    self.count_refusal();
                } else if self.resumes.accepts(
                    &record,
                    renews_after,
                    // Whether the queue a pause names is paused now.
                    matches!(&record.command, Command::Pause { queue } if self.view.is_paused(queue)),
                ) {
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
            Read::TooLarge(bytes) => {
                trust::refused(Kind::Command, &Refusal::TooLarge(bytes));
                self.count_refusal();
            }
            Read::Skip => {
                tracing::debug!(stream = %self.stream, ?offset, "skipped a message of the control stream that is not a command this version knows");
            }
        }
        if let Some(offset) = offset {
            self.next = Some(offset + 1);
        }
        Step::On
    }

    /// One delivery read while seeking: a trusted snapshot becomes the
    /// view (move past its offset); the follower's own sync marker means
    /// none that recent (move to the stream's start); nothing else is
    /// decoded.
    fn seek(&mut self, delivery: &Delivery) -> Step {
        let properties = &delivery.properties;
        if !message::is_snapshot(properties) && !message::is_sync_marker(properties) {
            return Step::On;
        }
        match message::read(properties, &delivery.data) {
            Read::Snapshot { records, of, at_ms } => {
                if let Err(refusal) = self.senders.admit(Role::Renewal, &delivery.properties) {
                    trust::refused(Kind::Command, &refusal);
                    return Step::On;
                }
                let now = queuey_core::__private::now_ms();
                self.view.reset();
                for record in &records {
                    match record.check_content(now) {
                        Ok(()) => {
                            self.view.apply(record);
                        }
                        Err(refusal) => trust::refused(Kind::Command, &Refusal::from(refusal)),
                    }
                }
                self.resumes.start_at_snapshot(of);
                self.saw_snapshot(at_ms);
                self.seeking = None;
                self.next = Some(of + 1);
                self.dirty = true;
                tracing::debug!(stream = %self.stream, of, records = records.len(), "following control commands from a snapshot");
                Step::Move
            }
            Read::Sync(nonce) if self.syncs.is_waiting(nonce) => {
                tracing::debug!(stream = %self.stream, "no recent snapshot of the control state; reading the control stream from its start");
                self.seeking = None;
                self.next = None;
                Step::Move
            }
            _ => Step::On,
        }
    }

    /// A snapshot taken at `at_ms` was read (or written).
    fn saw_snapshot(&mut self, at_ms: u64) {
        self.last_snapshot_ms = Some(self.last_snapshot_ms.map_or(at_ms, |last| last.max(at_ms)));
        self.refused = 0;
    }

    /// One more record refused; past this follower's share of a flood, a
    /// snapshot is written at once.
    fn count_refusal(&mut self) {
        self.refused += 1;
        if self.refused >= self.refusals_for_snapshot {
            self.refused = 0;
            self.write_snapshot();
        }
    }

    /// Writes a snapshot of the view when none was read or written for an
    /// interval, once the follower holds the whole state.
    fn snapshot_if_due(&mut self) {
        let now = queuey_core::__private::now_ms();
        let every = u64::try_from(self.snapshot_interval.as_millis()).unwrap_or(u64::MAX);
        if self
            .last_snapshot_ms
            .is_none_or(|last| now.saturating_sub(last) >= every)
        {
            self.write_snapshot();
        }
    }

    /// Writes a snapshot of the view as it stands (the state of every
    /// record up to the one last read), once the follower holds the whole
    /// state: not while seeking, and not before it first caught up.
    fn write_snapshot(&mut self) {
        let (false, true, Some(next)) = (self.seeking.is_some(), self.caught_up, self.next) else {
            return;
        };
        let now = queuey_core::__private::now_ms();
        let of = next.saturating_sub(1);
        let mut out = match message::snapshot(&self.stream, &self.view.snapshot(), of, now) {
            Ok(out) => out,
            Err(bytes) => {
                if !std::mem::replace(&mut self.too_large_told, true) {
                    tracing::warn!(stream = %self.stream, bytes, limit = message::MAX_SNAPSHOT_BYTES, "the control state is too large to snapshot (too many cancellations by id); processes that start read the control stream from its start");
                }
                return;
            }
        };
        match self
            .senders
            .sign(out.properties, "writing a snapshot of the control state")
        {
            Ok(signed) => out.properties = signed,
            Err(error) => {
                tracing::warn!(%error, "cannot write a snapshot of the control state");
                return;
            }
        }
        self.too_large_told = false;
        self.saw_snapshot(now);
        let outbox = Arc::clone(&self.outbox);
        let stream = Arc::clone(&self.stream);
        tokio::spawn(async move {
            match outbox.control(out).await {
                Ok(()) => {
                    metrics::counter!(metric::SNAPSHOTS).increment(1);
                    tracing::debug!(%stream, of, "wrote a snapshot of the control state");
                }
                Err(error) => {
                    tracing::warn!(%stream, %error, "could not write a snapshot of the control state; another follower or the next turn will");
                }
            }
        });
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

    /// Consumes again from the offset after the last record read (at once
    /// when the follower `moved`, else after a pause), trying while the
    /// backend lives, longer apart after a refusal; `Err` with the reason
    /// once the backend is closed or gave up.
    async fn restart(&mut self, moved: bool) -> Result<Live, String> {
        let mut refused = false;
        let mut first_try = true;
        loop {
            if self.link.is_closed() {
                return Err("the backend was closed".to_owned());
            }
            if self.link.state() == ConnectionState::Failed {
                return Err("the backend gave up on RabbitMQ".to_owned());
            }
            let at_once = moved && std::mem::take(&mut first_try);
            if !at_once {
                tokio::time::sleep(self.pause).await;
                let longest = if refused {
                    REFUSED_PAUSE_MAX
                } else {
                    RESUME_PAUSE_MAX
                };
                self.pause = (self.pause * 2).min(longest);
            }
            if let (false, None, Some(next)) = (at_once, self.seeking, self.next) {
                // A stream deleted and declared again counts from 0: an
                // end before the offsets read means it is not the one read
                // before.
                match live::tail(&self.link, &self.outbox, &self.senders, &self.stream).await {
                    Ok(Some(tail)) if tail < next => {
                        tracing::warn!(stream = %self.stream, read_up_to = next, tail, "the control stream was deleted and declared again since it was last read; forgetting what was read from the old one and following the new one from its start");
                        self.rebuild();
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        // Without the end, consuming from the old offset
                        // could wait past the end of a replaced stream
                        // for good: look again after the pause.
                        tracing::debug!(stream = %self.stream, "did not find the control stream's end; looking again");
                        continue;
                    }
                    Err(error) => {
                        tracing::debug!(stream = %self.stream, %error, "cannot look at the control stream's end yet; trying again");
                        continue;
                    }
                }
            }
            let from = match (self.seeking, self.next) {
                (Some(seek), _) => seek.from(),
                (None, Some(next)) => StartAt::Offset(next),
                (None, None) => StartAt::First,
            };
            match live::start(&self.link, &self.stream, from).await {
                Ok(live) => {
                    if at_once {
                        tracing::debug!(stream = %self.stream, ?from, "following control commands from here");
                    } else {
                        tracing::info!(stream = %self.stream, ?from, "following control commands again");
                    }
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

/// What reading one delivery asks of the follower.
enum Step {
    /// Read on.
    On,
    /// Consume again from where the follower now stands.
    Move,
}

/// Acknowledges every delivery up to `tag` on the stream's channel. A
/// failure means the channel is gone, which the consumer reports itself.
async fn acknowledge(live: &Live, tag: u64) {
    let multiple = BasicAckOptions { multiple: true };
    if let Err(error) = live.channel.basic_ack(tag, multiple).await {
        tracing::debug!(%error, "could not acknowledge control records; the channel is gone");
    }
}
