//! Job results in one process: each waiting caller is a oneshot for its
//! answer and a reporter for its job's progress, found by its correlation
//! id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::Broker;
use crate::backend::{PendingReply, Reply, ReplyLost, ReplyTo};
use crate::control::ProgressReporter;
use crate::{Envelope, Error};

/// The address every reply of the memory backend goes to: its callers are
/// told apart by correlation id alone.
const ADDRESS: &str = "memory";

/// One waiting caller.
struct Waiter {
    answer: oneshot::Sender<Result<Reply, ReplyLost>>,
    progress: ProgressReporter,
}

/// The callers waiting for a reply.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: Mutex<HashMap<String, Waiter>>,
}

impl Replies {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        crate::lock(&self.waiting)
    }

    /// Gives up every wait: the backend closed.
    pub(crate) fn close(&self) {
        for (_, waiter) in self.waiting().drain() {
            let _ = waiter
                .answer
                .send(Err(ReplyLost::new("the memory backend was closed")));
        }
    }
}

/// Publishes `envelope` with a reply address, registered before the
/// publish so that the quickest reply finds its caller.
pub(crate) fn request(shared: &Arc<Broker>, mut envelope: Envelope) -> Result<PendingReply, Error> {
    let correlation_id = uuid::Uuid::new_v4().to_string();
    let (answer, receiver) = oneshot::channel();
    let (progress, updates) = ProgressReporter::channel();
    shared
        .replies
        .waiting()
        .insert(correlation_id.clone(), Waiter { answer, progress });
    let forget = Forget {
        shared: Arc::clone(shared),
        correlation_id: correlation_id.clone(),
    };
    envelope.reply_to = Some(ReplyTo::new(ADDRESS, correlation_id));
    shared.publish_now(&envelope)?;
    Ok(PendingReply::new(async move {
        let _forget = forget;
        receiver
            .await
            .unwrap_or_else(|_| Err(ReplyLost::new("the memory backend was closed")))
    })
    .with_progress(updates))
}

/// Hands `reply` to the caller waiting at `to`, if it still waits: a
/// progress report keeps it waiting, a final reply ends its wait.
pub(crate) fn reply(shared: &Broker, to: &ReplyTo, reply: Reply) {
    if to.address() == ADDRESS {
        let mut waiting = shared.replies.waiting();
        if let Reply::Progress(progress) = reply {
            if let Some(waiter) = waiting.get(to.correlation_id()) {
                return waiter.progress.set(progress);
            }
        } else if let Some(waiter) = waiting.remove(to.correlation_id()) {
            drop(waiting);
            let _ = waiter.answer.send(Ok(reply));
            return;
        }
    }
    tracing::debug!(
        correlation_id = to.correlation_id(),
        "no caller waits for this reply any more; dropped"
    );
}

/// Forgets a caller that stopped waiting (its timeout passed, or it was
/// dropped), so a later reply is dropped.
struct Forget {
    shared: Arc<Broker>,
    correlation_id: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.shared.replies.waiting().remove(&self.correlation_id);
    }
}
