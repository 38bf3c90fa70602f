//! Per-key limits on Redis: the [`LimitStore`] side of [`RedisStore`].

use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use queuey_core::store::limit::{HOLD_MEMORY, HOLD_WEIGHT, TURN_GRACE};
use queuey_core::store::{LimitStore, LimitUsage, Rate, Slot, StoreError, Turn};

use super::RedisStore;
use crate::limit_scripts::{FREE_SLOT, LIMIT_USAGE, RENEW_SLOT, RESERVE_TURN, TAKE_SLOT};

/// Whole microseconds, rounded up, for a lease or a grace.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

/// Microseconds to the nanosecond, for an interval or a tolerance: a rate
/// such as 3 per second keeps its exact spacing.
fn exact_micros(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    format!("{}.{:03}", nanos / 1_000, nanos % 1_000)
}

/// A count or duration in microseconds from a script, `-1` for none.
fn some_micros(value: i64) -> Option<Duration> {
    u64::try_from(value).ok().map(Duration::from_micros)
}

fn count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

/// `key`'s sub-keys `suffixes`, the keys of a limit script.
fn sub_keys<'a>(key: &'a str, suffixes: &'a [&str]) -> impl Iterator<Item = String> + 'a {
    suffixes.iter().map(move |suffix| format!("{key}:{suffix}"))
}

/// Per-key limits shared by every process that opens the same Redis.
///
/// Each operation is one Lua script, so it is atomic, and reads the
/// server's clock (`TIME`), so the clocks of workers do not matter. A limit
/// key `K` (after the store's prefix) uses `K:slots`, `K:started`,
/// `K:waiting`, `K:hold`, `K:rate` and `K:turns`. None outlives its use:
/// slots and the waiting set expire when their last lease ends, the rate's
/// state once the rate is idle again, reservations
/// [`TURN_GRACE`] after the last is due, and the typical hold time
/// [`HOLD_MEMORY`] after the last slot was freed. Time is kept in
/// microseconds; a wait is rounded up to the next one, never down.
impl LimitStore for RedisStore {
    fn take_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        limit: u32,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Slot, StoreError>> {
        async move {
            let answer: Vec<i64> = self
                .run(
                    &TAKE_SLOT,
                    sub_keys(key, &["slots", "started", "waiting", "hold"]),
                    &[
                        holder.to_owned(),
                        limit.to_string(),
                        micros(lease).to_string(),
                    ],
                )
                .await?;
            match answer.as_slice() {
                [1] => Ok(Slot::Taken),
                [2, left] => Ok(Slot::AlreadyHeld {
                    lease_left: some_micros(*left).unwrap_or_default(),
                }),
                [0, running, waiting, hold] => Ok(Slot::Full {
                    running: count(*running),
                    waiting: count(*waiting),
                    typical_hold: some_micros(*hold),
                }),
                other => Err(unexpected("take_slot", other)),
            }
        }
        .boxed()
    }

    fn renew_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        async move {
            let renewed: i64 = self
                .run(
                    &RENEW_SLOT,
                    sub_keys(key, &["slots", "started"]),
                    &[holder.to_owned(), micros(lease).to_string()],
                )
                .await?;
            Ok(renewed == 1)
        }
        .boxed()
    }

    fn free_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        async move {
            let freed: i64 = self
                .run(
                    &FREE_SLOT,
                    sub_keys(key, &["slots", "started", "hold"]),
                    &[
                        holder.to_owned(),
                        HOLD_WEIGHT.to_string(),
                        micros(HOLD_MEMORY).div_ceil(1_000).to_string(),
                    ],
                )
                .await?;
            Ok(freed == 1)
        }
        .boxed()
    }

    fn reserve_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Turn, StoreError>> {
        async move {
            let wait = self.turn(key, holder, rate, false).await?;
            Ok(Some(wait)
                .filter(|wait| !wait.is_zero())
                .map_or(Turn::Now, Turn::Wait))
        }
        .boxed()
    }

    fn book_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Duration, StoreError>> {
        self.turn(key, holder, rate, true).boxed()
    }

    fn limit_usage<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<LimitUsage, StoreError>> {
        async move {
            let answer: Vec<i64> = self
                .run(
                    &LIMIT_USAGE,
                    sub_keys(key, &["slots", "waiting", "rate", "hold"]),
                    &[],
                )
                .await?;
            match answer.as_slice() {
                [running, waiting, next_turn, hold] => Ok(LimitUsage {
                    running: count(*running),
                    waiting: count(*waiting),
                    next_turn_in: some_micros(*next_turn),
                    typical_hold: some_micros(*hold),
                }),
                other => Err(unexpected("limit_usage", other)),
            }
        }
        .boxed()
    }
}

impl RedisStore {
    /// Reserves (or, with `book`, books) `holder`'s turn: the wait until
    /// it, zero for a start now.
    async fn turn(
        &self,
        key: &str,
        holder: &str,
        rate: Rate,
        book: bool,
    ) -> Result<Duration, StoreError> {
        let wait: i64 = self
            .run(
                &RESERVE_TURN,
                sub_keys(key, &["rate", "turns"]),
                &[
                    holder.to_owned(),
                    exact_micros(rate.interval()),
                    exact_micros(rate.tolerance()),
                    micros(TURN_GRACE).to_string(),
                    u8::from(book).to_string(),
                ],
            )
            .await?;
        Ok(some_micros(wait).unwrap_or_default())
    }
}

/// A script answer of the wrong shape: a Redis that runs something else
/// under the script's name.
fn unexpected(operation: &str, answer: &[i64]) -> StoreError {
    StoreError::refused(format!(
        "Redis answered {answer:?} to the {operation} script, which is not an answer it gives; \
         is the server a Redis 5 or later?"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_go_to_the_script_in_microseconds_never_shortened() {
        assert_eq!(micros(Duration::from_nanos(1)), 1);
        assert_eq!(micros(Duration::from_millis(30)), 30_000);
        assert_eq!(micros(Duration::MAX), u64::MAX);
        assert_eq!(exact_micros(Duration::from_secs(1) / 3), "333333.333");
        assert_eq!(exact_micros(Duration::from_millis(100)), "100000.000");
        assert_eq!(some_micros(-1), None);
        assert_eq!(some_micros(1_500), Some(Duration::from_micros(1_500)));
    }
}
