//! Where a waiting caller's answer goes: an address and a correlation id
//! that travel beside the envelope.

use std::sync::Arc;

/// Where the final outcome of a job goes: an address the requesting backend
/// chose, and the id that matches the reply to its waiting caller.
///
/// Set only on jobs enqueued by a waiting caller; a backend carries it next
/// to the envelope (RabbitMQ: in the `reply_to` and `correlation_id`
/// properties), never in the job's own JSON. Cheap to clone (shared), and
/// one pointer wide, so an envelope nobody waits for is no larger for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplyTo(Arc<(String, String)>);

impl ReplyTo {
    /// A reply address and the correlation id of one waiting caller.
    pub fn new(address: impl Into<String>, correlation_id: impl Into<String>) -> Self {
        ReplyTo(Arc::new((address.into(), correlation_id.into())))
    }

    /// The address the reply is sent to (the backend's own form).
    pub fn address(&self) -> &str {
        &self.0.0
    }

    /// The id that matches the reply to the waiting caller.
    pub fn correlation_id(&self) -> &str {
        &self.0.1
    }
}
