//! Per-key limits shared by every process that reaches a store: how many
//! jobs of a key run at once, and how many start per period.
//!
//! A [`LimitStore`] keeps, for each key queuey gives it (the layer's own
//! prefix already on it), two independent limits. The rules below hold for
//! every implementation; [`MemoryStore`](super::MemoryStore) and the Redis
//! store follow them.
//!
//! # Running slots
//!
//! - Stored: the holders of the key's slots, each with the end of its
//!   lease; the holders refused a slot lately (the *waiting set*), each
//!   until a lease after its last refusal; and the key's typical hold time.
//! - [`take_slot`](LimitStore::take_slot) first drops the leases that have
//!   ended, then gives a slot if fewer than `limit` are held. A refused
//!   holder is put into the waiting set; [`Slot::Full`] counts that set,
//!   each holder once.
//! - A holder never holds two slots of a key. Asking while it holds one is
//!   another run of the same job (a copy of its message delivered while
//!   the first copy runs, or a run whose worker died before freeing its
//!   slot), and is refused with [`Slot::AlreadyHeld`] and the time left on
//!   the slot's lease; the lease is not touched, so a dead run's slot still
//!   comes back when it ends.
//! - [`renew_slot`](LimitStore::renew_slot) extends a lease that has not
//!   ended; [`free_slot`](LimitStore::free_slot) ends it and folds the time
//!   the slot was held into the typical hold time, an exponentially
//!   weighted average (each new hold weighs [`HOLD_WEIGHT`]).
//! - A process that dies holding slots leaves them held until their leases
//!   end, and no longer: the next `take_slot` of the key drops them. A
//!   holder that dies waiting drops out of the waiting set a lease after
//!   its last refusal.
//!
//! # Turns to start
//!
//! - A [`Rate`] allows `count` starts per `per`, spaced by its
//!   [interval](Rate::interval) `T = per / count`, with bursts of up to
//!   `burst` at once (the generic cell rate algorithm, GCRA, with a
//!   tolerance of `(burst - 1) * T`).
//! - Stored: three clocks of the key (theoretical arrival times): the
//!   turns given out, the starts made, and the turns promised to holders
//!   that came back too close to the last start, kept until an interval
//!   after the last is due; the tolerance last used;
//!   and the reservations of holders told to wait, each with the instant
//!   its turn is due.
//! - Every [`Turn::Now`] is a start, and starts are checked against the
//!   starts made: a start is allowed when the start clock, less the
//!   tolerance, is not ahead of now, and moves the clock on by an
//!   interval from when the start is counted. A start on a reserved turn
//!   less than an interval after that turn is counted at the turn (a
//!   holder a little late does not hold back the next); any other start
//!   is counted when it is made. However late holders come back, no span
//!   of one period holds more than `count + burst` starts of a key (both
//!   ends included).
//! - [`reserve_turn`](LimitStore::reserve_turn) answers [`Turn::Now`] when a
//!   start is allowed now (nothing is stored for the holder), or reserves
//!   the next free turn (after every turn given, start made and turn
//!   promised) and answers [`Turn::Wait`] until it. Every turn is given
//!   once: a holder that asks again while it holds a reservation is
//!   answered that reservation, never a second turn; a call before it is
//!   due answers the time still to wait, never less.
//! - Once its turn is due, the holder's next call starts it ([`Turn::Now`],
//!   the reservation consumed) when the starts made allow it. When they do
//!   not (the holder came back late, next to another start, or with many
//!   others after an outage), it is promised the next free start after the
//!   other promises and answered [`Turn::Wait`] until then: holders back
//!   together leave one interval apart, in the order they came back.
//! - [`book_turn`](LimitStore::book_turn) reserves the same way but stores
//!   the reservation even when it is due at once: a producer books a job's
//!   turn at enqueue and sends the job to arrive then, and the job's own
//!   `reserve_turn` finds it due and starts, without a second turn. A
//!   reservation nobody comes back for is dropped [`TURN_GRACE`] after it
//!   was due; its turn stays spent.
//!
//! # Atomicity, time and expiry
//!
//! Each operation is atomic on its key: two processes asking at once never
//! both get the last slot or the same turn. Time is the store's: tokio's
//! clock for the memory store (so tests with paused time see leases end),
//! the server's clock for Redis (so the clocks of workers do not matter).
//! Everything a key holds expires by itself once idle: slots and the
//! waiting set when their last lease ends, the rate's state when it is idle
//! again (every clock an interval behind now), reservations
//! [`TURN_GRACE`] after the last is due, and the typical hold time
//! [`HOLD_MEMORY`] after the last slot was freed.
//!
//! ```
//! use std::time::Duration;
//! use queuey_core::store::{LimitStore, MemoryStore, Rate, Slot, Turn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryStore::new();
//! let lease = Duration::from_secs(30);
//! let key = "limit:report:customer-7";
//!
//! // At most one report of a customer runs at once.
//! assert_eq!(store.take_slot(key, "job-a", 1, lease).await?, Slot::Taken);
//! assert!(matches!(
//!     store.take_slot(key, "job-b", 1, lease).await?,
//!     Slot::Full { running: 1, waiting: 1, typical_hold: None },
//! ));
//! // A second copy of job-a waits for the first to end.
//! assert_eq!(
//!     store.take_slot(key, "job-a", 1, lease).await?,
//!     Slot::AlreadyHeld { lease_left: lease },
//! );
//! assert!(store.free_slot(key, "job-a").await?);
//! assert_eq!(store.take_slot(key, "job-b", 1, lease).await?, Slot::Taken);
//!
//! // At most 2 reports of a customer start per second.
//! let rate: Rate = "2/s".parse()?;
//! assert_eq!(store.reserve_turn(key, "job-c", rate).await?, Turn::Now);
//! assert_eq!(
//!     store.reserve_turn(key, "job-d", rate).await?,
//!     Turn::Wait(Duration::from_millis(500)),
//! );
//! # Ok(())
//! # }
//! ```

mod rate;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{Store, StoreError};

pub use rate::{Rate, RateError};

/// How much one new hold weighs in a key's typical hold time: the average
/// becomes `average + HOLD_WEIGHT * (hold - average)`; the first hold sets
/// it.
pub const HOLD_WEIGHT: f64 = 0.2;

/// How long a reservation is kept after its turn is due, for a holder that
/// comes back late (the broker releases a parked job at or after its
/// delay). A holder that comes back later still reserves a new turn.
pub const TURN_GRACE: Duration = Duration::from_secs(60 * 60);

/// How long a key's typical hold time is kept after its last slot was
/// freed.
pub const HOLD_MEMORY: Duration = Duration::from_secs(24 * 60 * 60);

/// Counter of jobs a producer enqueued without booking their turn because
/// the limit store failed (labels `job_type`, and `reason`: `unavailable`,
/// `timed_out` or `refused`); their worker paces them instead.
pub const UNBOOKED_TOTAL: &str = "queuey_limit_unbooked_total";

/// Where the limits of `key` under the limit `name` are kept in a store:
/// `limit:{name}:{key}`. A job type's declared limits are named after the
/// type ([`Job::NAME`](crate::Job::NAME)).
///
/// ```
/// use queuey_core::store::limit::store_key;
///
/// assert_eq!(store_key("CallApi", "api.example"), "limit:CallApi:api.example");
/// ```
pub fn store_key(name: &str, key: &str) -> String {
    format!("limit:{name}:{key}")
}

/// The holder of a job's turn and running slot: its id, the same through
/// every deferral and redelivery, so that asking again is answered the
/// same.
pub fn holder(job_id: uuid::Uuid) -> String {
    job_id.simple().to_string()
}

/// A store that also keeps per-key limits shared by every process that
/// reaches it: running slots with leases, and turns to start under a
/// [`Rate`]. The [module documentation](self) states the rules every
/// implementation follows.
///
/// Errors are those of the other operations: [`StoreError::Unavailable`]
/// when the store could not be asked, [`StoreError::TimedOut`] from a
/// caller's bound, [`StoreError::Refused`] when it answered "no".
///
/// ```
/// use std::time::Duration;
/// use queuey_core::store::{LimitStore, MemoryStore, Slot};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), queuey_core::store::StoreError> {
/// let store = MemoryStore::new();
/// let lease = Duration::from_secs(30);
/// assert_eq!(store.take_slot("limit:sync:acme", "job-a", 2, lease).await?, Slot::Taken);
/// // Asking again is another run of job-a: it takes no second slot.
/// assert!(matches!(
///     store.take_slot("limit:sync:acme", "job-a", 2, lease).await?,
///     Slot::AlreadyHeld { lease_left } if lease_left <= lease,
/// ));
/// assert_eq!(store.limit_usage("limit:sync:acme").await?.running, 1);
/// assert!(store.renew_slot("limit:sync:acme", "job-a", lease).await?);
/// assert!(store.free_slot("limit:sync:acme", "job-a").await?);
/// assert!(!store.free_slot("limit:sync:acme", "job-a").await?);
/// # Ok(())
/// # }
/// ```
pub trait LimitStore: Store {
    /// Takes one of `limit` running slots of `key` for `holder` (a job
    /// id), leased for `lease`.
    ///
    /// Expired leases are dropped first, so a dead worker's slots come
    /// back after `lease`. A refused holder joins the key's waiting set for
    /// `lease`. A holder that already holds a slot of `key` is answered
    /// [`Slot::AlreadyHeld`] (it neither takes a second slot nor renews the
    /// first, nor joins the waiting set).
    fn take_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        limit: u32,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Slot, StoreError>>;

    /// Extends `holder`'s lease to `lease` from now; false if it no longer
    /// holds a slot (its lease ended, or it freed it).
    fn renew_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Gives `holder`'s slot back; false if it held none. Records how long
    /// the slot was held (into the key's typical hold time, an
    /// exponentially weighted average).
    fn free_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Reserves `holder`'s turn to start under `rate` (GCRA).
    ///
    /// If `holder` already holds a reservation for `key`, answers it:
    /// [`Turn::Wait`] with the time that remains before it is due; once
    /// due, [`Turn::Now`] (consuming it) if the starts made allow a start
    /// now, else [`Turn::Wait`] until the start it is promised instead (see
    /// [Turns to start](self#turns-to-start)). Otherwise reserves the next
    /// free turn:
    /// [`Turn::Now`] (nothing stored) or [`Turn::Wait`] with the
    /// reservation stored under `holder` until [`TURN_GRACE`] after it is
    /// due.
    fn reserve_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Turn, StoreError>>;

    /// Books `holder`'s turn to start under `rate` ahead of its start, for
    /// a producer that sends the job to arrive at its turn (see
    /// [Turns to start](self#turns-to-start)).
    ///
    /// Like [`reserve_turn`](Self::reserve_turn), but the reservation is
    /// stored even when its turn is due now, and the answer is the time
    /// until it (zero when due now). A holder that already holds a
    /// reservation is answered the time that remains, never a second
    /// turn. The holder's own `reserve_turn`, once the turn is due, answers
    /// [`Turn::Now`] and consumes it.
    fn book_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Duration, StoreError>>;

    /// What `key`'s limits hold now (for the tool, the dashboard and
    /// metrics).
    fn limit_usage<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<LimitUsage, StoreError>>;
}

/// A shared limit store is a limit store.
impl<S: LimitStore + ?Sized> LimitStore for Arc<S> {
    fn take_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        limit: u32,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Slot, StoreError>> {
        (**self).take_slot(key, holder, limit, lease)
    }

    fn renew_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        (**self).renew_slot(key, holder, lease)
    }

    fn free_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        (**self).free_slot(key, holder)
    }

    fn reserve_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Turn, StoreError>> {
        (**self).reserve_turn(key, holder, rate)
    }

    fn book_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Duration, StoreError>> {
        (**self).book_turn(key, holder, rate)
    }

    fn limit_usage<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<LimitUsage, StoreError>> {
        (**self).limit_usage(key)
    }
}

/// What [`LimitStore::take_slot`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// The holder took a slot.
    Taken,
    /// The holder already holds a slot of the key: another run of the same
    /// job holds it (a copy of its message delivered while the first copy
    /// runs, or a run whose worker died before freeing it). The slot is
    /// given back when that run frees it, or when its lease ends.
    AlreadyHeld {
        /// The time left on that slot's lease now.
        lease_left: Duration,
    },
    /// Every slot is held.
    Full {
        /// How many slots are held (leases not ended).
        running: u32,
        /// How many holders of this key were refused within the last lease,
        /// this one included, each counted once.
        waiting: u32,
        /// The key's typical hold time, if any slot was freed yet.
        typical_hold: Option<Duration>,
    },
}

/// What [`LimitStore::reserve_turn`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The holder may start now; its turn is spent.
    Now,
    /// The holder's turn is reserved and due after this long.
    Wait(Duration),
}

/// What a key's limits hold now, from [`LimitStore::limit_usage`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitUsage {
    /// Slots held (leases not ended).
    pub running: u32,
    /// Holders refused a slot within their last lease.
    pub waiting: u32,
    /// How long a holder asking for a new turn now would wait; `None` when
    /// it could start now (or the key has no rate state).
    pub next_turn_in: Option<Duration>,
    /// The key's typical hold time, if any slot was freed within
    /// [`HOLD_MEMORY`].
    pub typical_hold: Option<Duration>,
}
