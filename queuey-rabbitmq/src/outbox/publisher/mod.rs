//! The publishing lanes: confirm-mode channels, each owned by one task that
//! keeps a window of publishes in flight.
//!
//! # Why one owner per channel
//!
//! lapin gives a returned message to whichever confirmation completes
//! next, and publishes issued on one channel from several threads can
//! reach the broker out of delivery-tag order, so a confirmation can even
//! resolve on another message's ack. What holds:
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
//! # Writes overlap
//!
//! lapin's `basic_publish` takes the delivery tag and queues the frames at
//! its first poll, then waits for its io thread to write them. The owner
//! polls each publish once, in request order, keeps it in flight while it
//! is written, and drains every request already waiting before it yields:
//! many publishes leave in one write, and the owner never waits on the
//! socket. The sweep of rule 3 polls a publish's write before its
//! confirmation; lapin writes a message before it reads the broker's
//! answer to it, so a publish whose confirmation may carry a return has
//! finished writing by the time the sweep reaches it.
//!
//! # Failures
//!
//! A channel that fails is dropped with whatever lapin still holds for
//! it, never reused. Each publish in flight on it fails with
//! [`BackendErrorKind::Uncertain`], one not yet sent with
//! [`BackendErrorKind::ConnectionLost`]; the caller publishes again within
//! its bound (a duplicate at worst, never a loss or a false success). The
//! lane opens a fresh channel for its next request, waiting for a
//! reconnection if needed.
//!
//! # Refusals
//!
//! A nacked publish is the broker refusing it (a queue over its length
//! limit with `x-overflow=reject-publish`). The lane stops sending on that
//! channel and opens a fresh one: a quorum queue can go on refusing a
//! channel it refused once after its limit is lifted. The refused channel
//! is closed when its last publish in flight is decided.

mod confirms;
mod owner;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use lapin::BasicProperties;
use lapin::types::ShortString;
use queuey_core::Error;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::link::Link;
use owner::Owner;

/// One publish: where to, what, and the message id it carries. Cheap to
/// clone (the body is shared), so a caller can publish it again.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// The exchange, with `queue` as the routing key: the job exchange
    /// for jobs when the options name one, else (`None`) the default
    /// exchange, which routes to the queue named `queue`.
    pub(crate) exchange: Option<ShortString>,
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
                let owner = Owner::new(Arc::clone(&link), window, Arc::clone(&load));
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
        let lanes = self.lanes.iter();
        let least = lanes.min_by_key(|lane| lane.load.load(Ordering::Relaxed));
        least.unwrap_or(&self.lanes[0])
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
