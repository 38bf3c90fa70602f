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
//!
//! No job waits for its answer longer than the call bound: a round whose
//! sends outlive it answers its jobs, and every job waiting for the next
//! round, `TimedOut` (their acknowledgements still go out, with the next
//! round). One timer a round bounds them all, where a timer a job would
//! cost each acknowledgement its own.

mod open;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use lapin::Channel;
use lapin::options::BasicAckOptions;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::error::never_sent;
use open::{Asked, Frame, Open};

/// The outcome of an acknowledgement, as lapin gives it: `Ok(false)` when
/// the channel closed before it could be sent.
pub(crate) type Acked = lapin::Result<bool>;

/// What a job asking for its acknowledgement hears.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The acknowledgement's outcome.
    Acked(Acked),
    /// No outcome within the call bound; the acknowledgement may still go
    /// out.
    TimedOut,
}

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
    state: Mutex<State>,
    /// Wakes the writer when an acknowledgement is asked for while it is
    /// idle.
    wake: Notify,
    /// The longest a job waits for its answer.
    bound: Duration,
}

struct State {
    open: Open,
    /// The writer took a round and has not had all its answers yet.
    busy: bool,
}

impl AckChannel {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Acks {
    /// Starts the writer of a fresh consumer channel, whose jobs wait at
    /// most `bound` for their answers. It ends when the channel's consumer
    /// and every delivery from it are gone. Must be called inside a tokio
    /// runtime.
    pub(crate) fn start(channel: Channel, bound: Duration) -> Acks {
        let shared = Arc::new(AckChannel {
            channel,
            state: Mutex::new(State {
                open: Open::default(),
                busy: false,
            }),
            wake: Notify::new(),
            bound,
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
    /// dropping the answer does not cancel it. The answer comes within the
    /// writer's bound.
    ///
    /// A delivery that is the channel's only open one, while the writer is
    /// idle, has nothing to share an acknowledgement with: it is
    /// acknowledged here, sparing a prefetch-1 consumer the writer's hop.
    /// Its frame is queued before the state is released, so no later
    /// multiple acknowledgement can overtake it.
    pub(crate) fn ack(&self, tag: u64) -> impl Future<Output = Answer> + use<> {
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
            state.open.ask(Asked {
                tag,
                reply: Some(reply),
            });
            let idle = !state.busy;
            drop(state);
            if idle {
                self.shared.wake.notify_one();
            }
            Path::Queued(answer)
        };
        let bound = self.shared.bound;
        async move {
            match path {
                Path::Done(acked) => Answer::Acked(acked),
                Path::Direct(sending) => match tokio::time::timeout(bound, sending).await {
                    Ok(acked) => Answer::Acked(acked),
                    Err(_) => Answer::TimedOut,
                },
                // The writer dropped the request: it ended without sending
                // it (the runtime is shutting down); the broker delivers
                // the job again once the channel closes.
                Path::Queued(answer) => answer.await.unwrap_or(Answer::Acked(Ok(false))),
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
    Queued(oneshot::Receiver<Answer>),
}

/// The writer's loop: send a round of what was asked, wait for its
/// answers (up to the bound), repeat; sleep while nothing is asked.
async fn write(shared: Arc<AckChannel>, mut closed: mpsc::Receiver<()>) {
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
        // Every frame is queued on the connection at the first poll, in
        // order; past the bound, the sends go on without anyone waiting.
        let sends = round
            .iter()
            .map(|frame| ack(&shared.channel, frame.tag, frame.multiple));
        let sent = tokio::time::timeout(shared.bound, futures::future::join_all(sends)).await;
        match sent {
            Ok(outcomes) => {
                for (frame, acked) in round.into_iter().zip(outcomes) {
                    frame.answer(|| Answer::Acked(acked.clone()));
                }
            }
            Err(_) => {
                for frame in round {
                    frame.answer(|| Answer::TimedOut);
                }
                shared.state().open.time_out_waiting();
            }
        }
    }
}

impl Frame {
    /// Answers every job the acknowledgement covers.
    fn answer(self, answer: impl Fn() -> Answer) {
        for reply in self.replies {
            // The job may have gone.
            let _ = reply.send(answer());
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
