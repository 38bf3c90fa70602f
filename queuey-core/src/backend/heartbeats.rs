//! The backend's side of workers' heartbeats: a capability of its own.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::Backend;
use crate::Error;
use crate::control::Heartbeat;

/// A backend that keeps workers' heartbeats and lists the live workers.
///
/// A worker sends its heartbeats through it when its backend lists it in
/// [`Backend::capabilities`].
pub trait Heartbeats: Backend {
    /// Publishes a worker's [`Heartbeat`] for [`workers`](Heartbeats::workers)
    /// to list (one with [`stopping`](Heartbeat::stopping) set is its last).
    /// Best effort: the next one makes up for a lost one.
    fn heartbeat<'a>(&'a self, beat: &'a Heartbeat) -> BoxFuture<'a, Result<(), Error>>;

    /// The workers whose latest heartbeat is recent (within
    /// [`Heartbeat::lifetime`]) and not their last, each with that
    /// heartbeat, oldest worker first.
    fn workers<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Heartbeat>, Error>>;
}

crate::forward_to_shared! {
    impl<B: Heartbeats + ?Sized> Heartbeats for Arc<B> {
        fn heartbeat<'a>(&'a self, beat: &'a Heartbeat) -> BoxFuture<'a, Result<(), Error>>;
        fn workers<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Heartbeat>, Error>>;
    }
}
