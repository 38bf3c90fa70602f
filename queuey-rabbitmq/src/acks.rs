//! The acknowledgements of one consumer channel, coalesced.
//!
//! A broker spends less on one `basic.ack` with `multiple` set, covering a
//! run of deliveries, than on one acknowledgement per delivery; on a
//! priority queue the difference is the broker's whole throughput. A
//! consumer channel therefore has one writer task that every successful
//! job's acknowledgement goes through. The writer knows every delivery the
//! channel received and not yet settled (**open**), and whether its job
//! asked for an acknowledgement. Each time it wakes it sends:
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
//! The writer waits for the sends of one round before the next, so the
//! acknowledgements that arrive meanwhile make the next run longer: under
//! load, the broker sees a few acknowledgements a round; at a trickle, each
//! job is acknowledged on its own. A delivery that is the channel's only
//! open one (always, at a prefetch of 1) is acknowledged by its job's own
//! task while the writer is idle, without the hop through the writer.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use lapin::Channel;
use lapin::options::BasicAckOptions;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::error::never_sent;

/// The outcome of an acknowledgement, as lapin gives it: `Ok(false)` when
/// the channel closed before it could be sent.
pub(crate) type Acked = lapin::Result<bool>;

/// The writer of one consumer channel's acknowledgements. Cheap to clone:
/// every delivery of the channel holds one.
#[derive(Clone)]
pub(crate) struct Acks {
    shared: Arc<Shared>,
    /// Closed when the last handle is gone: the writer then sends what is
    /// left and ends.
    _alive: mpsc::Sender<()>,
}

struct Shared {
    /// The consumer's channel, which every acknowledgement goes out on. The
    /// writer and every handle keep it open.
    channel: Channel,
    state: Mutex<State>,
    /// Wakes the writer when an acknowledgement is asked for while it is
    /// idle.
    wake: Notify,
}

struct State {
    open: Open,
    /// The writer took a round and has not had all its answers yet.
    busy: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Acks {
    /// Starts the writer of a fresh consumer channel. It ends when the
    /// channel's consumer and every delivery from it are gone. Must be
    /// called inside a tokio runtime.
    pub(crate) fn start(channel: Channel) -> Acks {
        let shared = Arc::new(Shared {
            channel,
            state: Mutex::new(State {
                open: Open::default(),
                busy: false,
            }),
            wake: Notify::new(),
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

    /// Records a delivery, before anything else may settle it.
    pub(crate) fn delivered(&self, tag: u64) {
        self.shared.state().open.delivered(tag);
    }

    /// Records that a delivery's settle (a nack, a reject, an
    /// acknowledgement made by its own acker) is out: later runs may reach
    /// past it. Call it only once the settle call returned, whatever its
    /// outcome: lapin sends an acker's frame from a task of its own, so the
    /// call's return is the first moment the frame is known to be queued.
    pub(crate) fn settled(&self, tag: u64) {
        self.shared.state().open.settled(tag);
    }

    /// Acknowledges a delivery. The acknowledgement is under way (handed to
    /// the writer, or queued on the connection) as soon as this returns, so
    /// dropping the answer does not cancel it.
    ///
    /// A delivery that is the channel's only open one, while the writer is
    /// idle, has nothing to share an acknowledgement with: it is
    /// acknowledged here, sparing a prefetch-1 consumer the writer's hop.
    /// Its frame is queued before the state is released, so no later
    /// multiple acknowledgement can overtake it.
    pub(crate) fn ack(&self, tag: u64) -> impl Future<Output = Acked> + use<> {
        let mut state = self.shared.state();
        let path = if !state.busy && state.open.is_only(tag) {
            state.open.settled(tag);
            let shared = Arc::clone(&self.shared);
            let mut sending: Pin<Box<dyn Future<Output = Acked> + Send>> =
                Box::pin(async move { ack(&shared.channel, tag, false).await });
            // The first poll queues the frame; a no-op waker will do, the
            // answer is awaited (and the waker registered) below.
            let first = sending
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
            drop(state);
            match first {
                Poll::Ready(acked) => Path::Done(acked),
                Poll::Pending => Path::Direct(sending),
            }
        } else {
            let (reply, answer) = oneshot::channel();
            state.open.ask(Asked { tag, reply });
            let idle = !state.busy;
            drop(state);
            if idle {
                self.shared.wake.notify_one();
            }
            Path::Queued(answer)
        };
        async move {
            match path {
                Path::Done(acked) => acked,
                Path::Direct(sending) => sending.await,
                // The writer dropped the request: it ended without sending
                // it (the runtime is shutting down); the broker delivers
                // the job again once the channel closes.
                Path::Queued(answer) => answer.await.unwrap_or(Ok(false)),
            }
        }
    }
}

impl fmt::Debug for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acks").finish_non_exhaustive()
    }
}

/// Where an acknowledgement went.
enum Path {
    Done(Acked),
    Direct(Pin<Box<dyn Future<Output = Acked> + Send>>),
    Queued(oneshot::Receiver<Acked>),
}

/// The writer's loop: send a round of what was asked, wait for its
/// answers, repeat; sleep while nothing is asked.
async fn write(shared: Arc<Shared>, mut closed: mpsc::Receiver<()>) {
    let mut closing = false;
    loop {
        let round = {
            let mut state = shared.state();
            let round = state.open.round();
            state.busy = !round.is_empty();
            round
        };
        if round.is_empty() {
            if closing {
                return;
            }
            tokio::select! {
                biased;
                () = shared.wake.notified() => {}
                // No message is ever sent: this answers when every handle
                // is gone. One more round sends what they left.
                _ = closed.recv() => closing = true,
            }
            continue;
        }
        let sends = round.into_iter().map(|frame| frame.run(&shared.channel));
        futures::future::join_all(sends).await;
    }
}

/// A job's request for its acknowledgement.
struct Asked {
    tag: u64,
    reply: oneshot::Sender<Acked>,
}

/// The deliveries a channel received and did not settle yet.
#[derive(Default)]
struct Open {
    /// By tag: `Some` once the job asked for its acknowledgement.
    deliveries: BTreeMap<u64, Option<Asked>>,
    /// How many of `deliveries` asked.
    asked: usize,
    /// Acknowledgements of deliveries the writer did not know (none, unless
    /// a delivery was recorded on another writer): sent on their own.
    strays: Vec<Asked>,
}

impl Open {
    fn delivered(&mut self, tag: u64) {
        self.deliveries.insert(tag, None);
    }

    /// Whether `tag` is the one open delivery, and nothing was asked.
    fn is_only(&self, tag: u64) -> bool {
        self.asked == 0 && self.deliveries.len() == 1 && self.deliveries.contains_key(&tag)
    }

    fn settled(&mut self, tag: u64) {
        if let Some(Some(_)) = self.deliveries.remove(&tag) {
            // Cannot happen (a delivery is settled once); keep the count
            // right if it does.
            self.asked -= 1;
        }
    }

    fn ask(&mut self, asked: Asked) {
        let tag = asked.tag;
        match self.deliveries.get_mut(&tag) {
            Some(slot) => {
                if slot.replace(asked).is_none() {
                    self.asked += 1;
                }
            }
            None => self.strays.push(asked),
        }
    }

    /// Takes what can be acknowledged now, as the sends of one round.
    fn round(&mut self) -> Vec<Frame> {
        let mut round = Vec::new();
        // The run from the lowest open delivery.
        let mut run = Vec::new();
        while let Some(entry) = self.deliveries.first_entry() {
            if entry.get().is_none() {
                break;
            }
            if let Some(asked) = entry.remove() {
                run.push(asked);
            }
        }
        self.asked -= run.len();
        if let Some(last) = run.pop() {
            let mut replies: Vec<_> = run.into_iter().map(|asked| asked.reply).collect();
            let multiple = !replies.is_empty();
            replies.push(last.reply);
            round.push(Frame {
                tag: last.tag,
                multiple,
                replies,
            });
        }
        // Everything else that asked, behind a delivery still at work.
        if self.asked > 0 {
            self.deliveries.retain(|_, slot| match slot.take() {
                Some(asked) => {
                    round.push(Frame::one(asked));
                    false
                }
                None => true,
            });
            self.asked = 0;
        }
        round.extend(self.strays.drain(..).map(Frame::one));
        round
    }
}

/// One `basic.ack`, and the jobs it answers.
struct Frame {
    tag: u64,
    multiple: bool,
    replies: Vec<oneshot::Sender<Acked>>,
}

impl Frame {
    fn one(asked: Asked) -> Self {
        Frame {
            tag: asked.tag,
            multiple: false,
            replies: vec![asked.reply],
        }
    }

    async fn run(self, channel: &Channel) {
        let acked = ack(channel, self.tag, self.multiple).await;
        for reply in self.replies {
            // The job may have stopped waiting (its bound passed).
            let _ = reply.send(acked.clone());
        }
    }
}

/// Sends one `basic.ack` on the channel itself, not through a delivery's
/// acker: lapin hands an acker's acknowledgement to a task of its own, so
/// two of them can reach the wire in either order, and a plain
/// acknowledgement landing after a multiple one that covered it would
/// close the channel (`PRECONDITION_FAILED - unknown delivery tag`). The
/// channel's own call queues its frame when first polled, in call order.
///
/// `Ok(false)` when the channel is closed: nothing was sent.
async fn ack(channel: &Channel, tag: u64, multiple: bool) -> Acked {
    match channel.basic_ack(tag, BasicAckOptions { multiple }).await {
        Ok(()) => Ok(true),
        Err(e) if never_sent(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Open deliveries.
    fn open(tags: impl IntoIterator<Item = u64>) -> Open {
        let mut open = Open::default();
        for tag in tags {
            open.delivered(tag);
        }
        open
    }

    fn ask(open: &mut Open, tag: u64) -> oneshot::Receiver<Acked> {
        let (reply, answer) = oneshot::channel();
        open.ask(Asked { tag, reply });
        answer
    }

    /// A round as (tag acknowledged, multiple, jobs answered).
    fn round(open: &mut Open) -> Vec<(u64, bool, usize)> {
        open.round()
            .into_iter()
            .map(|send| (send.tag, send.multiple, send.replies.len()))
            .collect()
    }

    #[test]
    fn a_run_from_the_lowest_open_delivery_is_one_multiple_ack() {
        let mut open = open(1..=5);
        for tag in [3, 1, 2] {
            ask(&mut open, tag);
        }
        assert_eq!(round(&mut open), [(3, true, 3)]);
        // 4 and 5 are still open; a run of one is a plain ack.
        ask(&mut open, 4);
        assert_eq!(round(&mut open), [(4, false, 1)]);
        assert!(round(&mut open).is_empty());
    }

    #[test]
    fn a_delivery_at_work_is_never_covered() {
        let mut open = open(1..=6);
        // 2 is still at work: 1 goes alone, 4 and 6 on their own.
        for tag in [1, 3, 4, 6] {
            ask(&mut open, tag);
        }
        assert_eq!(
            round(&mut open),
            [(1, false, 1), (3, false, 1), (4, false, 1), (6, false, 1)]
        );
        assert_eq!(open.deliveries.keys().copied().collect::<Vec<_>>(), [2, 5]);
    }

    #[test]
    fn a_delivery_settled_elsewhere_ends_a_run_until_it_is_reported() {
        let mut open = open(1..=4);
        for tag in [1, 3, 4] {
            ask(&mut open, tag);
        }
        // 2 is being requeued by its own acker: 3 and 4 wait behind it
        // only in the sense that they are acknowledged one by one.
        assert_eq!(
            round(&mut open),
            [(1, false, 1), (3, false, 1), (4, false, 1)]
        );
        let mut open = self::open(1..=4);
        open.settled(2);
        for tag in [1, 3, 4] {
            ask(&mut open, tag);
        }
        assert_eq!(round(&mut open), [(4, true, 3)]);
    }

    #[test]
    fn only_a_lone_open_delivery_with_nothing_asked_may_skip_the_writer() {
        let mut open = open([7]);
        assert!(open.is_only(7));
        assert!(!open.is_only(8));
        open.delivered(8);
        assert!(!open.is_only(7), "another delivery could share its ack");
        open.settled(8);
        ask(&mut open, 7);
        assert!(!open.is_only(7), "already asked");
    }

    #[test]
    fn an_unknown_delivery_is_acknowledged_on_its_own() {
        let mut open = open([1]);
        ask(&mut open, 9);
        assert_eq!(round(&mut open), [(9, false, 1)]);
        assert_eq!(open.deliveries.len(), 1);
    }

    #[tokio::test]
    async fn every_job_of_a_run_gets_the_answer_of_its_ack() {
        let mut open = open(1..=3);
        let answers: Vec<_> = (1..=3).map(|tag| ask(&mut open, tag)).collect();
        for send in open.round() {
            for reply in send.replies {
                reply.send(Ok(true)).unwrap();
            }
        }
        for answer in answers {
            assert!(answer.await.unwrap().unwrap());
        }
    }
}
