//! The backend's side of control commands: a capability of its own.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::Backend;
use crate::Error;
use crate::control::{ControlRecord, ControlView};

/// A backend that carries the fleet's control commands: it sends each
/// command to every process that follows them, keeps it for processes that
/// start following later, and keeps a [`ControlView`] of them up to date.
///
/// [`Producer::cancel`](crate::Producer::cancel) and its siblings need it;
/// a worker follows and obeys the commands when its backend lists it in
/// [`Backend::capabilities`].
pub trait ControlChannel: Backend {
    /// Sends a control command (cancel a job, pause or resume a queue) to
    /// every process of the fleet that follows this backend's commands, and
    /// keeps it for processes that start following later. `Ok` means the
    /// broker holds it durably.
    ///
    /// An implementation refuses a record that fails
    /// [`ControlRecord::check`] before sending anything, as the memory and
    /// RabbitMQ backends do: every reader refuses it anyway.
    fn send_control<'a>(&'a self, record: &'a ControlRecord) -> BoxFuture<'a, Result<(), Error>>;

    /// The fleet's control state as this backend follows it, caught up with
    /// every command sent before the call: a worker reads it before it
    /// consumes anything. The backend keeps the view up to date while it
    /// lives; every call returns the same view.
    fn follow_control<'a>(&'a self) -> BoxFuture<'a, Result<ControlView, Error>>;
}

impl<B: ControlChannel + ?Sized> ControlChannel for Arc<B> {
    fn send_control<'a>(&'a self, record: &'a ControlRecord) -> BoxFuture<'a, Result<(), Error>> {
        (**self).send_control(record)
    }

    fn follow_control<'a>(&'a self) -> BoxFuture<'a, Result<ControlView, Error>> {
        (**self).follow_control()
    }
}
