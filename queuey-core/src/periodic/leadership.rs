//! Which process fires a schedule's ticks.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::Error;

/// How the processes sharing a backend agree on one to fire each
/// schedule's ticks, and remember the last tick fired.
///
/// [`lead`](Leadership::lead) waits until this process leads the schedule
/// `key`, then returns a [`Lease`] no other process on the broker holds at
/// the same time (RabbitMQ: a single-active-consumer queue per key). Object
/// safe: `Arc<dyn Leadership>` and any `Arc<L>` work.
pub trait Leadership: fmt::Debug + Send + Sync + 'static {
    /// Waits until this process leads `key`, and returns the lease. Fails
    /// when the backend cannot campaign (connection lost, closed).
    fn lead<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Box<dyn Lease>, Error>>;
}

/// The right to fire one schedule's ticks, and what the fleet remembers of
/// them.
///
/// A lease can be lost at any time (a dropped connection, a handover): every
/// method then fails, and the holder must stop and [`lead`](Leadership::lead) again.
pub trait Lease: fmt::Debug + Send {
    /// The last tick any leader [recorded](Lease::record), `None` for a
    /// schedule that never fired.
    fn last_tick(&self) -> Option<SystemTime>;

    /// Keeps the lease until `deadline` (whatever upkeep the backend needs
    /// happens meanwhile). `Err` means the lease was lost.
    fn hold_until<'a>(&'a mut self, deadline: Instant) -> BoxFuture<'a, Result<(), Error>>;

    /// Records `tick` as fired. `Ok` once the backend holds the record
    /// durably; `Err` means the lease was lost, and the record may or may
    /// not have been kept.
    fn record<'a>(&'a mut self, tick: SystemTime) -> BoxFuture<'a, Result<(), Error>>;

    /// Tells operators' tools the next tick and the schedule as text
    /// (`every 1s`), kept where a tool can read it (RabbitMQ: for `queuey
    /// schedules`; the default keeps nothing). `Err`: the lease was lost.
    fn announce<'a>(
        &'a mut self,
        next_tick: Option<SystemTime>,
        schedule: &'a str,
    ) -> BoxFuture<'a, Result<(), Error>> {
        let _ = (next_tick, schedule);
        Box::pin(futures::future::ready(Ok(())))
    }

    /// Gives the lease up, so another process can lead at once.
    fn release(self: Box<Self>) -> BoxFuture<'static, ()>;
}

crate::forward_to_shared! {
    impl<L: Leadership + ?Sized> Leadership for Arc<L> {
        fn lead<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Box<dyn Lease>, Error>>;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(dead_code)]
    fn object_safe(_: &dyn Leadership, _: Box<dyn Lease>) {}
}
