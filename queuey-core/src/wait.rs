//! How long a job may wait in a hold: the limits every backend's holds
//! share, below everything that asks for a wait.

use std::time::Duration;

/// The longest delay a hold accepts: 2^31 − 1 ms, about 24.8 days.
///
/// RabbitMQ hold queues expire after twice their TTL; this keeps both within
/// a signed 32-bit millisecond count. Longer delays are refused
/// ([`Error::DelayTooLong`](crate::Error::DelayTooLong)), never clamped.
pub const MAX_DEFERRAL_MS: u64 = (1 << 31) - 1;

/// The longest wait worth asking a hold for: 24 days.
///
/// Whole days under [`MAX_DEFERRAL_MS`], so rounding up to any granularity
/// of up to 20 hours stays under the cap. Backoffs above it are refused when
/// built and the worker's layers never ask for longer, so a hold never
/// refuses a wait. [`fits_a_hold`] is the one test against it.
pub const LONGEST_WAIT: Duration = Duration::from_secs(24 * 24 * 60 * 60);

/// Whether one hold keeps a job for `delay`: at most [`LONGEST_WAIT`].
///
/// The one place the limit is applied. A backoff longer than this is
/// refused when it is built ([`Backoff::fixed`](crate::Backoff::fixed),
/// [`ExponentialBackoff::new`](crate::ExponentialBackoff::new)), and a
/// retry or deferral longer than this is dead-lettered rather than
/// shortened ([`Disposition::never_early`](crate::Disposition::never_early)).
///
/// ```
/// use std::time::Duration;
/// use queuey_core::LONGEST_WAIT;
/// use queuey_core::backend::fits_a_hold;
///
/// assert!(fits_a_hold(LONGEST_WAIT));
/// assert!(!fits_a_hold(LONGEST_WAIT + Duration::from_nanos(1)));
/// ```
pub const fn fits_a_hold(delay: Duration) -> bool {
    delay.as_nanos() <= LONGEST_WAIT.as_nanos()
}
