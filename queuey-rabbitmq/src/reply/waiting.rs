//! The callers waiting for a reply, by correlation id, and the request
//! channels whose replies can still come.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use queuey_core::backend::{Reply, ReplyLost};
use queuey_core::control::{ProgressReporter, ProgressUpdates};
use tokio::sync::oneshot;

/// What a waiting caller receives.
pub(super) type Answer = Result<Reply, ReplyLost>;

struct Waiter {
    /// The request channel whose address the job carries.
    channel: u64,
    sender: oneshot::Sender<Answer>,
    /// Where the job's progress reports go until its answer comes.
    progress: ProgressReporter,
}

#[derive(Default)]
struct Inner {
    /// Request channels still open: a reply to them can come.
    live: HashSet<u64>,
    waiters: HashMap<String, Waiter>,
}

/// The callers waiting for a reply. One lock orders registering a caller
/// and losing its channel, so no caller waits on a channel that is gone.
#[derive(Default)]
pub(super) struct Waiting {
    inner: Mutex<Inner>,
}

impl Waiting {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request channel opened: replies to it can come.
    pub(super) fn opened(&self, channel: u64) {
        self.lock().live.insert(channel);
    }

    /// Registers the caller of `correlation_id`, whose request goes on
    /// `channel`: its answer, and its job's progress reports; `None` if
    /// that channel is gone already.
    pub(super) fn register(
        &self,
        channel: u64,
        correlation_id: &str,
    ) -> Option<(oneshot::Receiver<Answer>, ProgressUpdates)> {
        let mut inner = self.lock();
        if !inner.live.contains(&channel) {
            return None;
        }
        let (sender, receiver) = oneshot::channel();
        let (progress, updates) = ProgressReporter::channel();
        let waiter = Waiter {
            channel,
            sender,
            progress,
        };
        inner.waiters.insert(correlation_id.to_owned(), waiter);
        Some((receiver, updates))
    }

    /// Hands `reply` to the caller of `correlation_id`, if it still waits:
    /// a progress report keeps it waiting, a final reply ends its wait.
    pub(super) fn resolve(&self, correlation_id: &str, reply: Reply) {
        let mut inner = self.lock();
        match (reply, inner.waiters.get(correlation_id)) {
            (Reply::Progress(progress), Some(waiter)) => waiter.progress.set(progress),
            (reply, Some(_)) if reply.is_final() => {
                let waiter = inner.waiters.remove(correlation_id);
                let _ = waiter.map(|waiter| waiter.sender.send(Ok(reply)));
            }
            _ => tracing::debug!(
                correlation_id,
                "a reply came for a caller that no longer waits (it timed out, or an earlier \
                 reply answered it); dropped"
            ),
        }
    }

    /// Forgets a caller that stopped waiting.
    pub(super) fn forget(&self, correlation_id: &str) {
        self.lock().waiters.remove(correlation_id);
    }

    /// The request channel `channel` is gone: tells each caller waiting on
    /// it why, at once.
    pub(super) fn lost(&self, channel: u64, reason: &str) {
        let gone: Vec<Waiter> = {
            let mut inner = self.lock();
            inner.live.remove(&channel);
            let on_channel = inner.waiters.extract_if(|_, w| w.channel == channel);
            on_channel.map(|(_, waiter)| waiter).collect()
        };
        for waiter in gone {
            let _ = waiter.sender.send(Err(ReplyLost::new(reason)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::control::Progress;

    impl Waiting {
        /// How many callers wait.
        fn len(&self) -> usize {
            self.lock().waiters.len()
        }
    }

    #[tokio::test]
    async fn a_lost_channel_ends_its_callers_waits_and_no_other() {
        let waiting = Waiting::default();
        assert!(waiting.register(1, "a").is_none(), "not opened yet");
        waiting.opened(1);
        waiting.opened(2);
        let (a, _) = waiting.register(1, "a").unwrap();
        let (b, mut b_progress) = waiting.register(2, "b").unwrap();
        waiting.lost(1, "the connection dropped");
        assert_eq!(
            a.await.unwrap(),
            Err(ReplyLost::new("the connection dropped"))
        );
        assert!(
            waiting.register(1, "c").is_none(),
            "a lost channel takes no caller"
        );
        waiting.resolve("b", Reply::Progress(Progress::new(60, "most")));
        assert_eq!(b_progress.next().await, Some(Progress::new(60, "most")));
        waiting.resolve("b", Reply::DeadlinePassed);
        assert_eq!(b.await.unwrap(), Ok(Reply::DeadlinePassed));
        assert_eq!(b_progress.next().await, None, "no report after the answer");
        // A second reply, or one for a caller that gave up, is dropped.
        waiting.resolve("b", Reply::DeadlinePassed);
        let (d, _) = waiting.register(2, "d").unwrap();
        waiting.forget("d");
        assert!(d.await.is_err());
        assert_eq!(waiting.len(), 0);
    }
}
