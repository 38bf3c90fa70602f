//! The list of what a backend carries besides moving jobs.

use std::fmt;

use super::{ControlChannel, Heartbeats, Replies};

/// The capability traits a backend implements, as
/// [`Backend::capabilities`](super::Backend::capabilities) lists them.
///
/// A capability is listed by handing the backend to its setter, which only
/// compiles when the backend implements the trait:
///
/// ```
/// # use queuey_core::backend::Capabilities;
/// # use queuey_core::memory::MemoryBackend;
/// # let backend = MemoryBackend::new();
/// let listed = Capabilities::none()
///     .with_replies(&backend)
///     .with_control(&backend)
///     .with_heartbeats(&backend);
/// assert!(listed.control().is_some());
/// ```
///
/// A worker uses only what is listed: a backend that lists nothing runs its
/// jobs and nothing else. A missing control channel or heartbeat store is
/// logged at DEBUG when the worker starts; a waited-for job on a backend
/// without replies is logged at WARN when settled.
#[derive(Clone, Copy, Default)]
pub struct Capabilities<'a> {
    replies: Option<&'a dyn Replies>,
    control: Option<&'a dyn ControlChannel>,
    heartbeats: Option<&'a dyn Heartbeats>,
}

impl<'a> Capabilities<'a> {
    /// A backend that moves jobs and carries nothing else.
    pub const fn none() -> Self {
        Capabilities {
            replies: None,
            control: None,
            heartbeats: None,
        }
    }

    /// Lists `backend`'s [`Replies`].
    pub fn with_replies(mut self, backend: &'a dyn Replies) -> Self {
        self.replies = Some(backend);
        self
    }

    /// Lists `backend`'s [`ControlChannel`].
    pub fn with_control(mut self, backend: &'a dyn ControlChannel) -> Self {
        self.control = Some(backend);
        self
    }

    /// Lists `backend`'s [`Heartbeats`].
    pub fn with_heartbeats(mut self, backend: &'a dyn Heartbeats) -> Self {
        self.heartbeats = Some(backend);
        self
    }

    crate::getters! {
        /// The backend's replies to waiting callers, if it carries them.
        replies: Option<&'a dyn Replies>;
        /// The backend's control commands, if it carries them.
        control: Option<&'a dyn ControlChannel>;
        /// The backend's heartbeats, if it keeps them.
        heartbeats: Option<&'a dyn Heartbeats>;
    }
}

impl fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capabilities")
            .field("replies", &self.replies.is_some())
            .field("control", &self.control.is_some())
            .field("heartbeats", &self.heartbeats.is_some())
            .finish()
    }
}
