//! Job results in one process: each waiting caller is a oneshot, found by
//! its correlation id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

use super::Broker;
use crate::backend::{PendingReply, Reply, ReplyLost, ReplyTo};
use crate::{Envelope, Error};

/// The address every reply of the memory backend goes to: its callers are
/// told apart by correlation id alone.
const ADDRESS: &str = "memory";

type Waiter = oneshot::Sender<Result<Reply, ReplyLost>>;

/// The callers waiting for a reply.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: Mutex<HashMap<String, Waiter>>,
}

impl Replies {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives up every wait: the backend closed.
    pub(crate) fn close(&self) {
        for (_, waiter) in self.waiting().drain() {
            let _ = waiter.send(Err(ReplyLost::new("the memory backend was closed")));
        }
    }
}

/// Publishes `envelope` with a reply address, registered before the
/// publish so that the quickest reply finds its caller.
pub(crate) fn request(shared: &Arc<Broker>, mut envelope: Envelope) -> Result<PendingReply, Error> {
    let correlation_id = uuid::Uuid::new_v4().to_string();
    let (sender, receiver) = oneshot::channel();
    shared
        .replies
        .waiting()
        .insert(correlation_id.clone(), sender);
    let forget = Forget {
        shared: Arc::clone(shared),
        correlation_id: correlation_id.clone(),
    };
    envelope.reply_to = Some(ReplyTo::new(ADDRESS, correlation_id));
    shared.publish_now(&envelope)?;
    Ok(Box::pin(async move {
        let _forget = forget;
        receiver
            .await
            .unwrap_or_else(|_| Err(ReplyLost::new("the memory backend was closed")))
    }))
}

/// Hands `reply` to the caller waiting at `to`, if it still waits.
pub(crate) fn reply(shared: &Broker, to: &ReplyTo, reply: Reply) {
    let waiter = shared.replies.waiting().remove(to.correlation_id());
    match waiter {
        Some(waiter) if to.address() == ADDRESS => {
            let _ = waiter.send(Ok(reply));
        }
        _ => tracing::debug!(
            correlation_id = to.correlation_id(),
            "no caller waits for this reply any more; dropped"
        ),
    }
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
