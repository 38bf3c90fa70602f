//! The backend's side of control commands: a capability of its own.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::Backend;
use crate::Error;
use crate::control::{ControlRecord, ControlView};

/// A backend that carries the fleet's control commands to every process
/// that follows them, now or later, and keeps a [`ControlView`] up to date.
/// [`Producer::cancel`](crate::Producer::cancel) and its siblings need it; a
/// worker obeys them when [`Backend::capabilities`] lists it.
pub trait ControlChannel: Backend {
    /// Sends a control command to every process following this backend's
    /// commands, now or later; `Ok` means the broker holds it durably. A
    /// record failing [`ControlRecord::check`] is refused before sending
    /// (every reader would refuse it).
    fn send_control<'a>(&'a self, record: &'a ControlRecord) -> BoxFuture<'a, Result<(), Error>>;

    /// The fleet's control state, caught up with every command sent before
    /// the call and kept up to date while the backend lives (every call
    /// returns the same view).
    fn follow_control<'a>(&'a self) -> BoxFuture<'a, Result<ControlView, Error>>;
}

crate::forward_to_shared! {
    impl<B: ControlChannel + ?Sized> ControlChannel for Arc<B> {
        fn send_control<'a>(&'a self, record: &'a ControlRecord)
            -> BoxFuture<'a, Result<(), Error>>;
        fn follow_control<'a>(&'a self) -> BoxFuture<'a, Result<ControlView, Error>>;
    }
}
