//! The acknowledgements of one consumer channel, coalesced.
//!
//! One `basic.ack` with `multiple` set costs a broker less than one per
//! delivery (on a priority queue, the whole throughput). So every
//! successful job's acknowledgement goes through one writer task per
//! consumer channel, which knows every delivery received and not yet
//! settled (**open**) and whether its job asked for an acknowledgement.
//! Each time it wakes it sends:
//!
//! - for the longest run of open deliveries, from the lowest, whose jobs all
//!   asked for an acknowledgement: one `basic.ack` of the run's last tag with
//!   `multiple` set (a plain one for a run of one);
//! - for every other delivery that asked: a plain `basic.ack` of its tag.
//!
//! A multiple acknowledgement settles every unsettled delivery up to its
//! tag, so it must never reach a delivery that is still being worked on, or
//! that another path settles (a requeue, a reject, the poison guard's move):
//! such a delivery stays open, and so ends any run, until its own settle
//! has been sent ([`Acks::settled`]). A delivery that is never reported
//! settled only keeps the runs short: the safe side.
//!
//! A round's frames are queued on the connection, in order, when the
//! writer takes the round; it does not wait for lapin's io thread to write
//! them before the next (a task of their own waits, to count what was
//! lost), since every round it holds back is credit the broker does not
//! have to deliver the next jobs. It lets the jobs already ready to run
//! ask first, between two rounds and when woken from idle by the first
//! job of a burst, so a burst shares one round. The channel's only open
//! delivery (always, at a prefetch of 1) is acknowledged by the task
//! running its job while the writer is idle, without the hop through the
//! writer.
//!
//! A job does not wait for its round: once its acknowledgement is handed
//! to the writer (or queued on the connection) it is done. A channel
//! already closed when it asks is a failure (nothing is sent, the broker
//! delivers the job again); a channel that closes before the round goes
//! out loses that round's acknowledgements, which the writer logs and
//! counts (those jobs are delivered again too). Until every
//! acknowledgement handed to it is sent, a writer counts as a retirement
//! under way, so closing the backend waits for them.

mod open;

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use lapin::Channel;
use lapin::options::BasicAckOptions;
use tokio::sync::{Notify, mpsc};

use super::retirements::{Retirements, UnderWay};
use crate::error::never_sent;
use open::Open;

/// The outcome of an acknowledgement, as lapin gives it: `Ok(false)` when
/// the channel closed before it could be sent.
pub(crate) type Acked = lapin::Result<bool>;

/// Counter: acknowledgements handed to a channel's writer that could not be
/// sent (the channel closed first); the broker delivers those jobs again.
pub(crate) const ACKS_LOST_TOTAL: &str = "queuey_rabbitmq_acks_lost_total";

/// The writer of one consumer channel's acknowledgements. Cheap to clone:
/// every delivery of the channel holds one.
#[derive(Clone)]
pub(crate) struct Acks {
    shared: Arc<AckChannel>,
    /// Closed when the last handle is gone: the writer then sends what is
    /// left and ends.
    _alive: mpsc::Sender<()>,
}

struct AckChannel {
    /// The consumer's channel, which every acknowledgement goes out on. The
    /// writer and every handle keep it open.
    channel: Channel,
    /// The queue consumed, for the writer's logs and counters.
    queue: Arc<str>,
    state: Mutex<State>,
    /// Wakes the writer when an acknowledgement is asked for while it is
    /// idle.
    wake: Notify,
    /// The longest a round's sends are waited for, to count what was lost.
    bound: Duration,
    /// Where the writer counts as a retirement while it has
    /// acknowledgements to send.
    retirements: Arc<Retirements>,
}

struct State {
    open: Open,
    /// The writer took a round and has not queued its frames yet.
    busy: bool,
    /// Held from the first acknowledgement handed over until the writer
    /// has sent every one: closing the backend waits for it.
    sending: Option<UnderWay>,
}

impl AckChannel {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Acks {
    /// Starts the writer of a fresh consumer channel of `queue`, whose
    /// rounds' sends are waited for at most `bound`; it ends with the last
    /// handle. Must be called inside a tokio runtime.
    pub(crate) fn start(
        channel: Channel,
        queue: Arc<str>,
        bound: Duration,
        retirements: Arc<Retirements>,
    ) -> Acks {
        let shared = Arc::new(AckChannel {
            channel,
            queue,
            state: Mutex::new(State {
                open: Open::default(),
                busy: false,
                sending: None,
            }),
            wake: Notify::new(),
            bound,
            retirements,
        });
        let (alive, closed) = mpsc::channel(1);
        tokio::spawn(write(Arc::clone(&shared), closed));
        Acks {
            shared,
            _alive: alive,
        }
    }

    /// The consumer's channel.
    pub(crate) fn channel(&self) -> &Channel {
        &self.shared.channel
    }

    /// How many deliveries of the channel its workers still hold (not
    /// settled yet).
    pub(crate) fn working(&self) -> usize {
        self.shared.state().open.working()
    }

    /// Records a delivery, before anything else may settle it.
    pub(crate) fn delivered(&self, tag: u64) {
        self.shared.state().open.delivered(tag);
    }

    /// Records that a delivery's own settle (by its acker) is out, so later
    /// runs may reach past it. Call it only once the settle call returned,
    /// whatever its outcome: only then is the frame known to be queued.
    pub(crate) fn settled(&self, tag: u64) {
        self.shared.state().open.settled(tag);
    }

    /// Acknowledges a delivery: hands the acknowledgement to the writer and
    /// returns at once (`Ok(false)`: the channel is closed, nothing was
    /// sent). The channel's only open delivery, while the writer is idle,
    /// has its frame queued here, before the state is released, so no
    /// later multiple acknowledgement can overtake it.
    pub(crate) fn ack(&self, tag: u64) -> Acked {
        if !self.shared.channel.status().connected() {
            return Ok(false);
        }
        let mut state = self.shared.state();
        if !state.busy && state.open.is_only(tag) {
            state.open.settled(tag);
            let mut sending = std::pin::pin!(ack(&self.shared.channel, tag, false));
            // The first poll queues the frame; its being written is not
            // waited for.
            return match sending
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(acked) => acked,
                Poll::Pending => Ok(true),
            };
        }
        state.open.ask(tag);
        if state.sending.is_none() {
            state.sending = Some(self.shared.retirements.begin());
        }
        let idle = !state.busy;
        drop(state);
        if idle {
            self.shared.wake.notify_one();
        }
        Ok(true)
    }
}

impl fmt::Debug for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acks").finish_non_exhaustive()
    }
}

/// The writer's loop: queue a round of what was asked, let the jobs that
/// are ready ask, repeat; sleep while nothing is asked.
async fn write(shared: Arc<AckChannel>, mut closed: mpsc::Receiver<()>) {
    let mut closing = false;
    loop {
        let (round, done) = {
            let mut state = shared.state();
            let round = state.open.round();
            state.busy = !round.is_empty();
            // Nothing left to send: the writer stops counting as under way
            // (the token is dropped outside the lock).
            let done = if round.is_empty() {
                state.sending.take()
            } else {
                None
            };
            (round, done)
        };
        drop(done);
        if round.is_empty() {
            if closing {
                return;
            }
            tokio::select! {
                biased;
                () = shared.wake.notified() => {
                    // Woken by the first job of a burst: the others that
                    // are ready to run ask first, and share its round.
                    tokio::task::yield_now().await;
                }
                // No message is ever sent: this answers when every handle
                // is gone. One more round sends what they left.
                _ = closed.recv() => closing = true,
            }
            continue;
        }
        // Every frame is queued on the connection at its first poll, here,
        // in order; the next round need not wait for them to be written
        // (that is a hop through lapin's io thread and back): a task of
        // their own waits for them, up to the bound, and counts what was
        // lost, while the writer counts as under way.
        let mut outcomes = Vec::with_capacity(round.len());
        let mut pending: Pending = Vec::new();
        for frame in &round {
            let channel = shared.channel.clone();
            let (tag, multiple) = (frame.tag, frame.multiple);
            let mut sending: Sending = Box::pin(async move { ack(&channel, tag, multiple).await });
            match sending
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(acked) => outcomes.push((frame.jobs, acked)),
                Poll::Pending => pending.push((frame.jobs, sending)),
            }
        }
        {
            let mut state = shared.state();
            state.busy = false;
        }
        tokio::spawn(count_lost(
            Arc::clone(&shared.queue),
            shared.bound,
            outcomes,
            pending,
            shared.retirements.begin(),
        ));
        // The jobs that are ready to finish ask first, and share the next
        // round.
        tokio::task::yield_now().await;
    }
}

/// One `basic.ack` on its way to the broker.
type Sending = std::pin::Pin<Box<dyn Future<Output = Acked> + Send>>;

/// A round's sends that were still being written, each with the jobs it
/// acknowledges.
type Pending = Vec<(usize, Sending)>;

/// Waits for a round's sends still being written (at most `bound`), then
/// says how many jobs' acknowledgements, of those and of `outcomes`, could
/// not be sent. The round counts as under way until then.
async fn count_lost(
    queue: Arc<str>,
    bound: Duration,
    mut outcomes: Vec<(usize, Acked)>,
    pending: Pending,
    under_way: UnderWay,
) {
    let waits = pending
        .into_iter()
        .map(|(jobs, sending)| async move { (jobs, sending.await) });
    if let Ok(sent) = tokio::time::timeout(bound, futures::future::join_all(waits)).await {
        outcomes.extend(sent);
        let lost: usize = outcomes
            .iter()
            .filter(|(_, acked)| !matches!(acked, Ok(true)))
            .map(|(jobs, _)| jobs)
            .sum();
        if lost > 0 {
            let error = outcomes.iter().find_map(|(_, acked)| acked.as_ref().err());
            lost_acks(&queue, lost, error);
        }
    }
    drop(under_way);
}

/// Says that acknowledgements handed to the writer could not be sent.
fn lost_acks(queue: &str, lost: usize, error: Option<&lapin::Error>) {
    metrics::counter!(ACKS_LOST_TOTAL, "queue" => queue.to_owned()).increment(lost as u64);
    match error {
        Some(error) => tracing::warn!(
            queue,
            jobs = lost,
            %error,
            "could not acknowledge finished jobs; the broker delivers them again"
        ),
        None => tracing::warn!(
            queue,
            jobs = lost,
            "could not acknowledge finished jobs: their channel closed first (the connection \
             they came on is gone); the broker delivers them again"
        ),
    }
}

/// Sends one `basic.ack` on the channel itself, which queues its frame
/// when first polled, in call order; an acker's goes through a task of its
/// own, and a plain acknowledgement landing after a multiple one that
/// covered it would close the channel. `Ok(false)`: the channel is closed.
async fn ack(channel: &Channel, tag: u64, multiple: bool) -> Acked {
    match channel.basic_ack(tag, BasicAckOptions { multiple }).await {
        Ok(()) => Ok(true),
        Err(e) if never_sent(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
