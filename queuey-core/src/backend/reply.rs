//! Job results: where a waiting caller's answer goes, what it says, and the
//! caller's side of the wait.
//!
//! A caller that waits for a job ([`Producer::enqueue_and_wait`](crate::Producer::enqueue_and_wait))
//! has its backend [`request`](Replies::request) it: the envelope gets a
//! [`ReplyTo`] (an address and a correlation id) that travels through every
//! hold, retry and deferral, and the caller a [`PendingReply`]. Once the
//! final outcome is settled, the worker sends one [`Reply`] there through
//! its own backend's [`reply`](Replies::reply), and progress reports
//! ([`Reply::Progress`]) meanwhile.
//!
//! Nothing guarantees the reply arrives: the caller's timeout is the only
//! bound. A reply to a caller that went away is dropped; a job delivered
//! again may reply twice (the caller takes the first).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::Backend;
use crate::control::{Progress, ProgressUpdates};
use crate::{Envelope, Error};

pub use crate::envelope::ReplyTo;

/// A backend that carries job results back to a waiting caller
/// ([`Producer::enqueue_and_wait`](crate::Producer::enqueue_and_wait)); a
/// worker replies through it when [`Backend::capabilities`] lists it.
pub trait Replies: Backend {
    /// Publishes the envelope like [`publish`](Backend::publish), with its
    /// [`reply_to`](Envelope::reply_to) set to an address of the backend's;
    /// the [`PendingReply`] resolves with the [`Reply`] a worker sends there.
    fn request<'a>(&'a self, envelope: Envelope) -> BoxFuture<'a, Result<PendingReply, Error>>;

    /// Sends a reply to the caller waiting at `to`; a caller that went away
    /// is not an error (the reply is dropped).
    fn reply<'a>(&'a self, to: &'a ReplyTo, reply: Reply) -> BoxFuture<'a, Result<(), Error>>;
}

crate::forward_to_shared! {
    impl<B: Replies + ?Sized> Replies for std::sync::Arc<B> {
        fn request<'a>(&'a self, envelope: Envelope) -> BoxFuture<'a, Result<PendingReply, Error>>;
        fn reply<'a>(&'a self, to: &'a ReplyTo, reply: Reply) -> BoxFuture<'a, Result<(), Error>>;
    }
}

/// What a worker sends a caller that waits for a job: progress reports
/// while it runs, then the job's final outcome.
///
/// JSON on the wire (`{"value": ..}`, `{"dead_lettered": ".."}`,
/// `{"progress": {"percent": 40}}`, ...). A final reply ends the caller's
/// [`PendingReply`]; a [`Reply::Progress`] goes to its progress reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reply {
    /// The job succeeded: its handler's output, as JSON.
    Value(Box<RawValue>),
    /// The job was dead-lettered, for this reason.
    DeadLettered(String),
    /// The job was dead-lettered because its deadline passed.
    DeadlinePassed,
    /// The job succeeded without an output to send (it did not encode as
    /// JSON, or the stack acknowledged the job without the handler): which.
    NoValue(String),
    /// Not an outcome: how far the running job got.
    Progress(Progress),
}

impl Reply {
    /// Whether this reply ends the caller's wait (every reply but
    /// [`Reply::Progress`] does).
    pub fn is_final(&self) -> bool {
        !matches!(self, Reply::Progress(_))
    }

    /// The reply as the JSON a backend sends.
    pub fn encode(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// A reply from the JSON [`encode`](Reply::encode) made.
    pub fn decode(body: &[u8]) -> Result<Reply, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

impl PartialEq for Reply {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Reply::Value(a), Reply::Value(b)) => a.get() == b.get(),
            (Reply::DeadLettered(a), Reply::DeadLettered(b)) => a == b,
            (Reply::NoValue(a), Reply::NoValue(b)) => a == b,
            (Reply::DeadlinePassed, Reply::DeadlinePassed) => true,
            (Reply::Progress(a), Reply::Progress(b)) => a == b,
            _ => false,
        }
    }
}

/// Why a reply can no longer come, in words for the caller (say, the
/// connection carrying the reply address dropped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ReplyLost {
    reason: String,
}

impl ReplyLost {
    /// A lost reply, for this reason.
    pub fn new(reason: impl Into<String>) -> Self {
        ReplyLost {
            reason: reason.into(),
        }
    }

    /// Why the reply cannot come.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// The caller's side of a request: resolves with the job's final [`Reply`]
/// or why it cannot come, carrying [`Progress`] reports meanwhile when the
/// backend passes them on. Dropping it gives up the wait.
pub struct PendingReply {
    pub(crate) answer: BoxFuture<'static, Result<Reply, ReplyLost>>,
    pub(crate) progress: Option<ProgressUpdates>,
}

impl PendingReply {
    /// A wait that ends with `answer`'s outcome, with no progress reports.
    pub fn new(answer: impl Future<Output = Result<Reply, ReplyLost>> + Send + 'static) -> Self {
        PendingReply {
            answer: Box::pin(answer),
            progress: None,
        }
    }

    /// The same wait, seeing progress through `updates`: the backend reports
    /// each [`Reply::Progress`] for this caller on the
    /// [`ProgressReporter`](crate::control::ProgressReporter) paired with it.
    pub fn with_progress(mut self, updates: ProgressUpdates) -> Self {
        self.progress = Some(updates);
        self
    }
}

impl Future for PendingReply {
    type Output = Result<Reply, ReplyLost>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.answer.as_mut().poll(cx)
    }
}

impl fmt::Debug for PendingReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingReply")
            .field("progress", &self.progress.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_address_costs_an_envelope_one_pointer() {
        assert_eq!(
            std::mem::size_of::<Option<ReplyTo>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn replies_are_small_json_and_decode_back() {
        let value = Reply::Value(serde_json::value::to_raw_value(&[1, 2]).unwrap());
        let dead = Reply::DeadLettered("boom".into());
        let none = Reply::NoValue("no output".into());
        let progress = Reply::Progress(Progress::new(40, "half"));
        assert_eq!(
            progress.encode().unwrap(),
            br#"{"progress":{"percent":40,"message":"half"}}"#
        );
        assert!(!progress.is_final() && dead.is_final());
        assert_eq!(value.encode().unwrap(), br#"{"value":[1,2]}"#);
        assert_eq!(dead.encode().unwrap(), br#"{"dead_lettered":"boom"}"#);
        assert_eq!(
            Reply::DeadlinePassed.encode().unwrap(),
            br#""deadline_passed""#
        );
        for reply in [value, dead, none, progress, Reply::DeadlinePassed] {
            assert_eq!(Reply::decode(&reply.encode().unwrap()).unwrap(), reply);
        }
        assert!(Reply::decode(b"garbage").is_err());
    }
}
