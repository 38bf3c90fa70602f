//! Where a waiting caller's answer goes: an address and a correlation id
//! that travel beside the envelope.

use std::sync::Arc;

/// Where the final outcome of a job goes: an address the requesting backend
/// chose, and the id that matches the reply to its waiting caller.
///
/// Set only on jobs of a waiting caller, carried beside the envelope's JSON
/// (RabbitMQ: `reply_to` and `correlation_id` properties). Shared and one
/// pointer wide: cheap to clone, and no weight on other envelopes.
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
