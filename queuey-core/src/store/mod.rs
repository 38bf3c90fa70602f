//! Short-lived keys that producers and workers of a fleet share: the claims
//! of unique jobs and the records of jobs already handled.
//!
//! RabbitMQ cannot tell whether a message like this one is already queued,
//! nor whether a redelivered job already ran; a [`Store`] can. Each key
//! lives for a time-to-live and is then gone by itself, so nothing a crashed
//! process claimed stays claimed past its window.
//!
//! Two stores come with queuey: [`MemoryStore`], for one process (tests, the
//! memory backend, a single worker), and a Redis store in its own crate for
//! a fleet. Any other store with an atomic "set if absent, with expiry" can
//! implement the trait.
//!
//! Both are also a [`LimitStore`]: per-key limits on how many jobs run at
//! once and how many start per period, shared the same way (see
//! [`limit`] for the rules).
//!
//! ```
//! use std::time::Duration;
//! use queuey_core::store::{Inserted, MemoryStore, Store};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), queuey_core::store::StoreError> {
//! let store = MemoryStore::new();
//! let ttl = Duration::from_secs(60);
//! assert_eq!(store.insert("unique:report:7", "job-a", ttl).await?, Inserted::New);
//! assert_eq!(
//!     store.insert("unique:report:7", "job-b", ttl).await?,
//!     Inserted::Exists("job-a".to_owned()),
//! );
//! // Only the holder's value removes the key.
//! assert!(!store.remove("unique:report:7", "job-b").await?);
//! assert!(store.remove("unique:report:7", "job-a").await?);
//! # Ok(())
//! # }
//! ```

mod bounded;
mod error;
pub mod limit;
mod memory;
pub(crate) mod throttle;
mod window;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

pub use bounded::{DEFAULT_STORE_TIMEOUT, bounded};
pub use error::StoreError;
pub use limit::{
    HOLD_MEMORY, HOLD_WEIGHT, LimitStore, LimitUsage, Rate, RateError, Slot, TURN_GRACE, Turn,
};
pub use memory::MemoryStore;
pub use window::{MAX_WINDOW, WindowError, check_window};

/// Counter of unique jobs enqueued without their uniqueness check because
/// the store failed (labels `queue`, `job_type`, and `reason`:
/// `unavailable`, `timed_out` or `refused`, as [`StoreError::kind`]).
/// Such a job is published (uniqueness fails open); a rising count means
/// duplicates may be waiting.
pub const UNIQUE_UNCHECKED_TOTAL: &str = "queuey_unique_unchecked_total";

/// What [`Store::insert`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// The key was absent and now holds the value given.
    New,
    /// The key already held this value; it was left as it was.
    Exists(String),
}

/// Keys with a value and a time-to-live, shared by every process that
/// reaches the store.
///
/// Every operation is atomic on its key. Values are short strings (a job
/// id, a marker); keys are chosen by queuey and carry their own prefix.
/// A time-to-live is rounded up to a whole millisecond, and a zero one is
/// taken as one millisecond. queuey passes only windows that
/// [`check_window`] accepts (at most [`MAX_WINDOW`]) and leases of seconds.
///
/// An implementation answers [`StoreError::Refused`] when the store
/// answered "no" to an operation, and [`StoreError::Unavailable`] only when
/// it could not be asked, so that logs and metrics point at the right cause.
pub trait Store: fmt::Debug + Send + Sync + 'static {
    /// Sets `key` to `value` for `ttl` if it holds nothing; otherwise
    /// leaves it and answers what it holds.
    fn insert<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>>;

    /// The value `key` holds, if any.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>>;

    /// Sets `key` to `value` for `ttl`, whatever it held.
    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Gives `key` a new time-to-live of `ttl` if it holds `value`; answers
    /// whether it did.
    fn extend<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Removes `key` if it holds `value`; answers whether it did. A key
    /// taken over by someone else since is left alone.
    fn remove<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
}

crate::forward_to_shared! {
    /// A shared store is a store, so one can be handed to a producer and a
    /// worker at once.
    impl<S: Store + ?Sized> Store for Arc<S> {
        fn insert<'a>(&'a self, key: &'a str, value: &'a str, ttl: Duration)
            -> BoxFuture<'a, Result<Inserted, StoreError>>;
        fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
        fn set<'a>(&'a self, key: &'a str, value: &'a str, ttl: Duration)
            -> BoxFuture<'a, Result<(), StoreError>>;
        fn extend<'a>(&'a self, key: &'a str, value: &'a str, ttl: Duration)
            -> BoxFuture<'a, Result<bool, StoreError>>;
        fn remove<'a>(&'a self, key: &'a str, value: &'a str)
            -> BoxFuture<'a, Result<bool, StoreError>>;
    }
}

/// A time-to-live in whole milliseconds, at least one, as stores take it.
pub fn ttl_ms(ttl: Duration) -> u64 {
    let ms = ttl.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_to_a_whole_millisecond_of_at_least_one() {
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::from_nanos(1)), 1);
        assert_eq!(ttl_ms(Duration::from_micros(1_500)), 2);
        assert_eq!(ttl_ms(Duration::from_secs(3)), 3_000);
        assert_eq!(ttl_ms(Duration::MAX), u64::MAX);
    }

    fn object_safe(_: &dyn Store) {}

    #[test]
    fn a_store_is_object_safe_and_shareable() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        object_safe(&store);
    }
}
