//! The per-key limits of a [`MemoryStore`].

use std::collections::HashMap;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use tokio::time::Instant;

use super::MemoryStore;
use crate::store::limit::{HOLD_MEMORY, HOLD_WEIGHT, TURN_GRACE};
use crate::store::{LimitStore, LimitUsage, Rate, Slot, StoreError, Turn};

/// Every key's limits.
#[derive(Default)]
pub(super) struct Limits {
    keys: HashMap<String, KeyLimits>,
    /// Sweep idle keys when the map has grown to this many.
    sweep_at: usize,
}

/// One key's limits.
#[derive(Default)]
struct KeyLimits {
    /// Holders of a slot, with when they took it and when the lease ends.
    slots: HashMap<String, Lease>,
    /// Holders refused a slot, with when they stop counting as waiting.
    waiting: HashMap<String, Instant>,
    /// The typical hold time and when it is forgotten.
    hold: Option<(Duration, Instant)>,
    /// The rate's clocks, while any of them is ahead of now.
    rate: Option<RateClocks>,
    /// Reservations: when each holder's turn is due.
    turns: HashMap<String, Instant>,
}

struct Lease {
    taken: Instant,
    until: Instant,
}

/// A key's rate: the three theoretical arrival times of its rules (see
/// [`crate::store::limit`]), and the rate last asked with.
#[derive(Clone, Copy)]
struct RateClocks {
    /// Turns given out.
    turns: Instant,
    /// Starts made, as recorded (behind now once the rate allows the
    /// next); none since the key was last idle.
    starts: Option<Instant>,
    /// Promised turns, for reservations that came due too close to a start.
    promised: Instant,
    rate: Rate,
}

impl RateClocks {
    /// When the clocks stop mattering: an interval after the last is due
    /// (a start late by less than an interval is counted at its turn, up to
    /// that far back).
    fn idle_at(&self) -> Instant {
        later(self.last(), self.rate.interval())
    }

    /// The latest of the clocks.
    fn last(&self) -> Instant {
        let last = self.turns.max(self.promised);
        self.starts.map_or(last, |starts| starts.max(last))
    }
}

impl KeyLimits {
    /// Drops whatever has expired at `now`.
    fn expire(&mut self, now: Instant) {
        self.slots.retain(|_, lease| lease.until > now);
        self.waiting.retain(|_, until| *until > now);
        if self.hold.is_some_and(|(_, forget)| forget <= now) {
            self.hold = None;
        }
        if self.rate.is_some_and(|rate| rate.idle_at() <= now) {
            self.rate = None;
        }
        self.turns.retain(|_, due| later(*due, TURN_GRACE) > now);
    }

    fn is_idle(&self) -> bool {
        self.slots.is_empty()
            && self.waiting.is_empty()
            && self.hold.is_none()
            && self.rate.is_none()
            && self.turns.is_empty()
    }

    fn typical_hold(&self) -> Option<Duration> {
        self.hold.map(|(average, _)| average)
    }

    /// The key's rate clocks, the turns and promises none behind `now`.
    fn clocks(&self, rate: Rate, now: Instant) -> RateClocks {
        let clocks = self.rate.unwrap_or(RateClocks {
            turns: now,
            starts: None,
            promised: now,
            rate,
        });
        RateClocks {
            turns: clocks.turns.max(now),
            promised: clocks.promised.max(now),
            rate,
            ..clocks
        }
    }

    /// Takes the next free turn under `rate`, after every start made or
    /// promised: when it is due (`now` or earlier when a start is allowed
    /// at once).
    fn next_turn(&mut self, rate: Rate, now: Instant) -> Instant {
        let mut clocks = self.clocks(rate, now);
        let base = clocks.last();
        clocks.turns = later(base, rate.interval());
        self.rate = Some(clocks);
        base.checked_sub(rate.tolerance()).unwrap_or(now)
    }

    /// When the starts made allow the next: `now` or later.
    fn next_start(&self, rate: Rate, now: Instant) -> Instant {
        self.rate
            .and_then(|clocks| clocks.starts)
            .map_or(now, |starts| {
                starts
                    .checked_sub(rate.tolerance())
                    .map_or(now, |at| at.max(now))
            })
    }

    /// Records a start now, counted at `turn` when that is a reserved turn
    /// less than an interval ago (so a start a little late does not delay
    /// the next), else now.
    fn start(&mut self, rate: Rate, now: Instant, turn: Option<Instant>) {
        let counted = match turn {
            Some(turn) if now - turn < rate.interval() => turn,
            _ => now,
        };
        let mut clocks = self.clocks(rate, now);
        let starts = clocks.starts.map_or(counted, |starts| starts.max(counted));
        clocks.starts = Some(later(starts, rate.interval()));
        self.rate = Some(clocks);
    }

    /// Promises the next free start to a reservation that came due too
    /// close to the last start: a turn after the other promises, never
    /// before the starts allow.
    fn promise(&mut self, rate: Rate, now: Instant) -> Instant {
        let next_start = self.next_start(rate, now);
        let mut clocks = self.clocks(rate, now);
        let promise = clocks.promised.max(next_start);
        clocks.promised = later(promise, rate.interval());
        self.rate = Some(clocks);
        promise
    }
}

impl Limits {
    /// `key`'s limits, expired parts dropped, created if absent.
    fn key(&mut self, key: &str, now: Instant) -> &mut KeyLimits {
        if !self.keys.contains_key(key) && self.keys.len() >= self.sweep_at {
            self.keys.retain(|_, limits| {
                limits.expire(now);
                !limits.is_idle()
            });
            self.sweep_at = (self.keys.len() * 2).max(1024);
        }
        let limits = self.keys.entry(key.to_owned()).or_default();
        limits.expire(now);
        limits
    }
}

/// `at + by`, or far in the future if that overflows.
fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .unwrap_or_else(|| at + Duration::from_secs(100 * 365 * 86_400))
}

/// A count as the `u32` the answers carry.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The new typical hold: the first hold, then an exponentially weighted
/// average.
fn average(previous: Option<Duration>, hold: Duration) -> Duration {
    match previous {
        None => hold,
        Some(average) => {
            let moved =
                average.as_secs_f64() + HOLD_WEIGHT * (hold.as_secs_f64() - average.as_secs_f64());
            Duration::try_from_secs_f64(moved).unwrap_or(average)
        }
    }
}

impl MemoryStore {
    fn with_limits<T>(&self, key: &str, f: impl FnOnce(&mut KeyLimits, Instant) -> T) -> T {
        let now = Instant::now();
        let mut limits = self
            .limits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(limits.key(key, now), now)
    }
}

fn ready<'a, T: Send + 'a>(answer: T) -> BoxFuture<'a, Result<T, StoreError>> {
    futures::future::ready(Ok(answer)).boxed()
}

impl LimitStore for MemoryStore {
    fn take_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        limit: u32,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Slot, StoreError>> {
        ready(self.with_limits(key, |limits, now| {
            let until = later(now, lease);
            if let Some(held) = limits.slots.get(holder) {
                return Slot::AlreadyHeld {
                    lease_left: held.until - now,
                };
            }
            if count(limits.slots.len()) < limit {
                limits
                    .slots
                    .insert(holder.to_owned(), Lease { taken: now, until });
                limits.waiting.remove(holder);
                return Slot::Taken;
            }
            limits.waiting.insert(holder.to_owned(), until);
            Slot::Full {
                running: count(limits.slots.len()),
                waiting: count(limits.waiting.len()),
                typical_hold: limits.typical_hold(),
            }
        }))
    }

    fn renew_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        ready(
            self.with_limits(key, |limits, now| match limits.slots.get_mut(holder) {
                Some(held) => {
                    held.until = later(now, lease);
                    true
                }
                None => false,
            }),
        )
    }

    fn free_slot<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        ready(
            self.with_limits(key, |limits, now| match limits.slots.remove(holder) {
                Some(held) => {
                    let hold = average(limits.typical_hold(), now - held.taken);
                    limits.hold = Some((hold, later(now, HOLD_MEMORY)));
                    true
                }
                None => false,
            }),
        )
    }

    fn reserve_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Turn, StoreError>> {
        ready(self.with_limits(key, |limits, now| {
            let due = match limits.turns.get(holder) {
                Some(&due) if due > now => return Turn::Wait(due - now),
                Some(_) if limits.next_start(rate, now) > now => {
                    let promise = limits.promise(rate, now);
                    limits.turns.insert(holder.to_owned(), promise);
                    return Turn::Wait(promise - now);
                }
                Some(&turn) => {
                    limits.turns.remove(holder);
                    limits.start(rate, now, Some(turn));
                    return Turn::Now;
                }
                None => limits.next_turn(rate, now),
            };
            if due <= now {
                limits.start(rate, now, None);
                return Turn::Now;
            }
            limits.turns.insert(holder.to_owned(), due);
            Turn::Wait(due - now)
        }))
    }

    fn book_turn<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
        rate: Rate,
    ) -> BoxFuture<'a, Result<Duration, StoreError>> {
        ready(self.with_limits(key, |limits, now| {
            let due = match limits.turns.get(holder) {
                Some(&due) => due,
                None => {
                    let due = limits.next_turn(rate, now).max(now);
                    limits.turns.insert(holder.to_owned(), due);
                    due
                }
            };
            due.saturating_duration_since(now)
        }))
    }

    fn limit_usage<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<LimitUsage, StoreError>> {
        ready(self.with_limits(key, |limits, now| LimitUsage {
            running: count(limits.slots.len()),
            waiting: count(limits.waiting.len()),
            next_turn_in: limits.rate.and_then(|clocks| {
                clocks
                    .last()
                    .checked_sub(clocks.rate.tolerance())
                    .filter(|due| *due > now)
                    .map(|due| due - now)
            }),
            typical_hold: limits.typical_hold(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);
    const MS: Duration = Duration::from_millis(1);

    async fn advance(by: Duration) {
        tokio::time::advance(by).await;
    }

    fn rate(text: &str) -> Rate {
        text.parse().unwrap()
    }

    fn object_safe(_: &dyn LimitStore) {}

    #[test]
    fn a_limit_store_is_object_safe_and_shareable() {
        let store: std::sync::Arc<dyn LimitStore> = std::sync::Arc::new(MemoryStore::new());
        object_safe(&store);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_holders_slot_comes_back_when_its_lease_ends() {
        let store = MemoryStore::new();
        assert_eq!(
            store.take_slot("k", "a", 2, LEASE).await.unwrap(),
            Slot::Taken
        );
        advance(Duration::from_secs(10)).await;
        assert_eq!(
            store.take_slot("k", "b", 2, LEASE).await.unwrap(),
            Slot::Taken
        );
        assert!(matches!(
            store.take_slot("k", "c", 2, LEASE).await.unwrap(),
            Slot::Full { running: 2, .. }
        ));
        advance(Duration::from_secs(20) - MS).await;
        assert!(matches!(
            store.take_slot("k", "c", 2, LEASE).await.unwrap(),
            Slot::Full { running: 2, .. }
        ));
        // a never freed nor renewed its slot: it ends 30 s after it was taken.
        advance(MS).await;
        assert_eq!(
            store.take_slot("k", "c", 2, LEASE).await.unwrap(),
            Slot::Taken
        );
        assert!(!store.renew_slot("k", "a", LEASE).await.unwrap());
        assert!(!store.free_slot("k", "a").await.unwrap());
        assert_eq!(store.limit_usage("k").await.unwrap().running, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewed_lease_runs_from_the_renewal() {
        let store = MemoryStore::new();
        store.take_slot("k", "a", 1, LEASE).await.unwrap();
        advance(Duration::from_secs(20)).await;
        assert!(store.renew_slot("k", "a", LEASE).await.unwrap());
        advance(Duration::from_secs(29)).await;
        assert!(matches!(
            store.take_slot("k", "b", 1, LEASE).await.unwrap(),
            Slot::Full { running: 1, .. }
        ));
        advance(Duration::from_secs(1)).await;
        assert_eq!(
            store.take_slot("k", "b", 1, LEASE).await.unwrap(),
            Slot::Taken
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_run_of_a_holder_is_refused_and_leaves_the_lease_alone() {
        let store = MemoryStore::new();
        assert_eq!(
            store.take_slot("k", "a", 2, LEASE).await.unwrap(),
            Slot::Taken
        );
        advance(Duration::from_secs(20)).await;
        // Another run of a, with a slot free: it takes no second slot.
        assert_eq!(
            store.take_slot("k", "a", 2, LEASE).await.unwrap(),
            Slot::AlreadyHeld {
                lease_left: Duration::from_secs(10)
            }
        );
        let usage = store.limit_usage("k").await.unwrap();
        assert_eq!((usage.running, usage.waiting), (1, 0));
        assert_eq!(
            store.take_slot("k", "b", 2, LEASE).await.unwrap(),
            Slot::Taken
        );
        // The refusal renewed nothing: a's slot ends 30 s after it was
        // taken, and a may take one again then.
        advance(Duration::from_secs(10)).await;
        assert_eq!(
            store.take_slot("k", "a", 2, LEASE).await.unwrap(),
            Slot::Taken
        );
        assert_eq!(store.limit_usage("k").await.unwrap().running, 2);
        assert!(store.free_slot("k", "a").await.unwrap());
        assert!(!store.free_slot("k", "a").await.unwrap());
        assert!(!store.renew_slot("k", "a", LEASE).await.unwrap());
        assert!(!store.free_slot("other", "a").await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn refused_holders_count_once_each_until_a_lease_after_their_refusal() {
        let store = MemoryStore::new();
        store.take_slot("k", "a", 1, LEASE).await.unwrap();
        let full = |running, waiting| Slot::Full {
            running,
            waiting,
            typical_hold: None,
        };
        assert_eq!(
            store.take_slot("k", "b", 1, LEASE).await.unwrap(),
            full(1, 1)
        );
        advance(Duration::from_secs(10)).await;
        assert_eq!(
            store.take_slot("k", "c", 1, LEASE).await.unwrap(),
            full(1, 2)
        );
        assert_eq!(
            store.take_slot("k", "b", 1, LEASE).await.unwrap(),
            full(1, 2)
        );
        assert_eq!(
            store.take_slot("k", "c", 1, LEASE).await.unwrap(),
            full(1, 2)
        );
        assert_eq!(store.limit_usage("k").await.unwrap().waiting, 2);
        // b asked again at 10 s, so it waits until 40 s; c too.
        assert!(store.renew_slot("k", "a", 3 * LEASE).await.unwrap());
        advance(LEASE - MS).await;
        assert_eq!(store.limit_usage("k").await.unwrap().waiting, 2);
        advance(MS).await;
        assert_eq!(store.limit_usage("k").await.unwrap().waiting, 0);
        // A holder that gets its slot stops waiting.
        assert_eq!(
            store.take_slot("k", "b", 1, LEASE).await.unwrap(),
            full(1, 1)
        );
        assert!(store.free_slot("k", "a").await.unwrap());
        assert_eq!(
            store.take_slot("k", "b", 1, LEASE).await.unwrap(),
            Slot::Taken
        );
        assert_eq!(store.limit_usage("k").await.unwrap().waiting, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_typical_hold_is_a_weighted_average_of_freed_slots() {
        let store = MemoryStore::new();
        let hold_of = |slot| match slot {
            Slot::Full { typical_hold, .. } => typical_hold,
            other => panic!("expected a full key, not {other:?}"),
        };
        store.take_slot("k", "a", 1, LEASE).await.unwrap();
        assert_eq!(
            hold_of(store.take_slot("k", "x", 1, LEASE).await.unwrap()),
            None
        );
        advance(Duration::from_secs(10)).await;
        assert!(store.free_slot("k", "a").await.unwrap());
        store.take_slot("k", "b", 1, LEASE).await.unwrap();
        assert_eq!(
            hold_of(store.take_slot("k", "x", 1, LEASE).await.unwrap()),
            Some(Duration::from_secs(10))
        );
        advance(Duration::from_secs(20)).await;
        assert!(store.free_slot("k", "b").await.unwrap());
        // 10 s + 0.2 * (20 s - 10 s)
        let usage = store.limit_usage("k").await.unwrap();
        assert_eq!(usage.typical_hold, Some(Duration::from_secs(12)));
        // An ended lease is no hold: freeing it records nothing.
        store.take_slot("k", "c", 1, LEASE).await.unwrap();
        advance(LEASE).await;
        assert!(!store.free_slot("k", "c").await.unwrap());
        advance(HOLD_MEMORY - LEASE - MS).await;
        assert_eq!(
            store.limit_usage("k").await.unwrap().typical_hold,
            Some(Duration::from_secs(12))
        );
        advance(MS).await;
        assert_eq!(store.limit_usage("k").await.unwrap().typical_hold, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_starts_at_once_then_turns_are_spaced_by_the_interval() {
        let store = MemoryStore::new();
        let rate = rate("10/s burst 3");
        for holder in ["a", "b", "c"] {
            assert_eq!(
                store.reserve_turn("k", holder, rate).await.unwrap(),
                Turn::Now
            );
        }
        for (i, holder) in ["d", "e", "f"].into_iter().enumerate() {
            let wait = Duration::from_millis(100) * (i as u32 + 1);
            assert_eq!(
                store.reserve_turn("k", holder, rate).await.unwrap(),
                Turn::Wait(wait)
            );
        }
        let usage = store.limit_usage("k").await.unwrap();
        assert_eq!(usage.next_turn_in, Some(Duration::from_millis(400)));
        // Idle for the burst's worth of intervals, the burst is back: the
        // late holders start in it, and the next waits an interval.
        advance(Duration::from_millis(400 + 300)).await;
        for holder in ["d", "e", "f"] {
            assert_eq!(
                store.reserve_turn("k", holder, rate).await.unwrap(),
                Turn::Now
            );
        }
        assert_eq!(
            store.reserve_turn("k", "g", rate).await.unwrap(),
            Turn::Wait(Duration::from_millis(100))
        );
        // Idle again, a burst of new holders starts at once.
        advance(Duration::from_secs(1)).await;
        for holder in ["h", "i", "j"] {
            assert_eq!(
                store.reserve_turn("k", holder, rate).await.unwrap(),
                Turn::Now
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_reservation_is_answered_again_never_early_and_consumed_when_due() {
        let store = MemoryStore::new();
        let rate = rate("2/s");
        assert_eq!(store.reserve_turn("k", "a", rate).await.unwrap(), Turn::Now);
        let half = Duration::from_millis(500);
        assert_eq!(
            store.reserve_turn("k", "b", rate).await.unwrap(),
            Turn::Wait(half)
        );
        advance(Duration::from_millis(200)).await;
        // Asking again takes no second turn: c is still next after b.
        assert_eq!(
            store.reserve_turn("k", "b", rate).await.unwrap(),
            Turn::Wait(Duration::from_millis(300))
        );
        assert_eq!(
            store.reserve_turn("k", "c", rate).await.unwrap(),
            Turn::Wait(Duration::from_millis(800))
        );
        advance(Duration::from_millis(300) - MS).await;
        assert_eq!(
            store.reserve_turn("k", "b", rate).await.unwrap(),
            Turn::Wait(MS)
        );
        advance(MS).await;
        assert_eq!(store.reserve_turn("k", "b", rate).await.unwrap(), Turn::Now);
        // Consumed: b asking once more is a new start, after c.
        assert_eq!(
            store.reserve_turn("k", "b", rate).await.unwrap(),
            Turn::Wait(Duration::from_secs(1))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_booked_turn_is_kept_even_when_due_now_and_started_once_by_its_holder() {
        let store = MemoryStore::new();
        let rate = rate("2/s");
        let half = Duration::from_millis(500);
        // Due at once, yet kept for a; b is a turn later.
        assert_eq!(
            store.book_turn("k", "a", rate).await.unwrap(),
            Duration::ZERO
        );
        assert_eq!(store.book_turn("k", "b", rate).await.unwrap(), half);
        // Booking again answers the same reservation, no second turn.
        assert_eq!(store.book_turn("k", "b", rate).await.unwrap(), half);
        // A job that was not booked waits behind both.
        assert_eq!(
            store.reserve_turn("k", "c", rate).await.unwrap(),
            Turn::Wait(2 * half)
        );
        // a starts on its booked turn, once.
        assert_eq!(store.reserve_turn("k", "a", rate).await.unwrap(), Turn::Now);
        assert_eq!(
            store.reserve_turn("k", "a", rate).await.unwrap(),
            Turn::Wait(3 * half)
        );
        // b, back before its turn, waits the rest, never less.
        advance(Duration::from_millis(200)).await;
        assert_eq!(
            store.reserve_turn("k", "b", rate).await.unwrap(),
            Turn::Wait(Duration::from_millis(300))
        );
        assert_eq!(
            store.book_turn("k", "b", rate).await.unwrap(),
            Duration::from_millis(300)
        );
        advance(Duration::from_millis(300)).await;
        assert_eq!(store.reserve_turn("k", "b", rate).await.unwrap(), Turn::Now);
        // A booking nobody comes for is dropped after the grace; its turn
        // stays spent.
        assert_eq!(store.book_turn("k", "d", rate).await.unwrap(), 3 * half);
        advance(3 * half + TURN_GRACE + MS).await;
        assert_eq!(
            store.book_turn("k", "d", rate).await.unwrap(),
            Duration::ZERO
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reservation_nobody_comes_back_for_is_dropped_after_the_grace() {
        let store = MemoryStore::new();
        let rate = rate("1/m");
        assert_eq!(store.reserve_turn("k", "a", rate).await.unwrap(), Turn::Now);
        let minute = Duration::from_secs(60);
        assert_eq!(
            store.reserve_turn("k", "b", rate).await.unwrap(),
            Turn::Wait(minute)
        );
        // b, back late but within the grace, starts; the next start is a
        // minute after it.
        advance(minute + TURN_GRACE - MS).await;
        assert_eq!(store.reserve_turn("k", "b", rate).await.unwrap(), Turn::Now);
        assert_eq!(
            store.reserve_turn("k", "c", rate).await.unwrap(),
            Turn::Wait(minute)
        );
        advance(minute + TURN_GRACE).await;
        // c's reservation is gone; it takes a new turn, which is free now.
        assert_eq!(store.reserve_turn("k", "c", rate).await.unwrap(), Turn::Now);
        assert!(store.with_limits("k", |limits, _| limits.turns.is_empty()));
    }

    #[tokio::test(start_paused = true)]
    async fn holders_coming_back_when_told_never_start_faster_than_the_rate() {
        let store = MemoryStore::new();
        let rate = rate("5/s burst 4");
        let started = Instant::now();
        let mut starts = Vec::new();
        // 40 holders arrive in the first 100 ms; each comes back when told.
        let mut back: Vec<(Instant, String)> = (0..40)
            .map(|i| (started + Duration::from_micros(2_500 * i), format!("h{i}")))
            .collect();
        while !back.is_empty() {
            back.sort();
            let (at, holder) = back.remove(0);
            tokio::time::advance(at.saturating_duration_since(Instant::now())).await;
            match store.reserve_turn("k", &holder, rate).await.unwrap() {
                Turn::Now => starts.push(Instant::now() - started),
                Turn::Wait(wait) => back.push((Instant::now() + wait, holder)),
            }
        }
        assert_eq!(starts.len(), 40);
        let interval = rate.interval();
        for (i, start) in starts.iter().enumerate() {
            // The i-th start comes no earlier than its place in the rate.
            let place = interval * (i as u32).saturating_sub(3);
            assert!(*start >= place, "start {i} at {start:?}, before {place:?}");
        }
        assert_eq!(*starts.last().unwrap(), interval * 36);
    }

    /// A store where, under 2 a second, a started and b and c hold the
    /// next two turns (at 0.5 s and 1 s).
    async fn a_starts_b_and_c_wait() -> (MemoryStore, Rate) {
        let store = MemoryStore::new();
        let rate = rate("2/s");
        assert_eq!(store.reserve_turn("k", "a", rate).await.unwrap(), Turn::Now);
        for (holder, wait) in [("b", 500), ("c", 1_000)] {
            assert_eq!(
                store.reserve_turn("k", holder, rate).await.unwrap(),
                Turn::Wait(Duration::from_millis(wait))
            );
        }
        (store, rate)
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_a_little_late_is_counted_at_its_turn() {
        let (store, rate) = a_starts_b_and_c_wait().await;
        let ms = |n: u64| Duration::from_millis(n);
        // b comes back 300 ms late: less than an interval, so c, on time,
        // is not held back by it.
        advance(ms(800)).await;
        assert_eq!(store.reserve_turn("k", "b", rate).await.unwrap(), Turn::Now);
        advance(ms(200)).await;
        assert_eq!(store.reserve_turn("k", "c", rate).await.unwrap(), Turn::Now);
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_due_too_close_to_the_last_start_is_promised_the_next_free_start() {
        let (store, rate) = a_starts_b_and_c_wait().await;
        let ms = |n: u64| Duration::from_millis(n);
        // b comes back 600 ms late, a whole interval, and starts then; c,
        // back 100 ms after its turn, would start right beside it: it is
        // promised the start at 1.6 s instead.
        advance(ms(1_100)).await;
        assert_eq!(store.reserve_turn("k", "b", rate).await.unwrap(), Turn::Now);
        assert_eq!(
            store.reserve_turn("k", "c", rate).await.unwrap(),
            Turn::Wait(ms(500))
        );
        // A new holder's turn comes after the promise.
        assert_eq!(
            store.reserve_turn("k", "d", rate).await.unwrap(),
            Turn::Wait(ms(1_000))
        );
        advance(ms(499)).await;
        assert_eq!(
            store.reserve_turn("k", "c", rate).await.unwrap(),
            Turn::Wait(ms(1))
        );
        advance(ms(1)).await;
        assert_eq!(store.reserve_turn("k", "c", rate).await.unwrap(), Turn::Now);
        advance(ms(500)).await;
        assert_eq!(store.reserve_turn("k", "d", rate).await.unwrap(), Turn::Now);
    }

    #[tokio::test(start_paused = true)]
    async fn turns_that_fell_due_during_an_outage_start_at_the_rate_in_the_order_holders_return() {
        let store = MemoryStore::new();
        let rate = rate("10/s burst 2");
        let interval = rate.interval();
        for i in 0..6 {
            store.book_turn("k", &format!("h{i}"), rate).await.unwrap();
        }
        // Every turn falls due while nobody can come; then all come back.
        advance(Duration::from_secs(60)).await;
        let mut answers = Vec::new();
        for i in [3, 0, 5, 1, 4, 2] {
            answers.push(
                store
                    .reserve_turn("k", &format!("h{i}"), rate)
                    .await
                    .unwrap(),
            );
        }
        // The burst starts at once; the rest leave one interval apart.
        assert_eq!(
            answers,
            vec![
                Turn::Now,
                Turn::Now,
                Turn::Wait(interval),
                Turn::Wait(interval * 2),
                Turn::Wait(interval * 3),
                Turn::Wait(interval * 4),
            ]
        );
    }

    /// The most of `starts` (sorted) in any window of `per`, both ends
    /// included.
    fn most_in(starts: &[Instant], per: Duration) -> usize {
        (0..starts.len())
            .map(|i| {
                starts[i..]
                    .iter()
                    .take_while(|s| **s <= starts[i] + per)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[tokio::test(start_paused = true)]
    async fn holders_back_late_after_an_outage_never_start_faster_than_the_rate() {
        let store = MemoryStore::new();
        let rate = rate("10/s burst 2");
        let began = Instant::now();
        let mut first_due = HashMap::new();
        let mut back: Vec<(Instant, String)> = Vec::new();
        for i in 0..60 {
            let holder = format!("h{i}");
            let wait = store.book_turn("k", &holder, rate).await.unwrap();
            first_due.insert(holder.clone(), began + wait);
            // Each comes back late: by up to 0.7 s, and those due in the
            // first three seconds only when a 3 s outage ends.
            let late = Duration::from_millis(fastrand::u64(0..700));
            back.push((
                (began + wait + late).max(began + Duration::from_secs(3)),
                holder,
            ));
        }
        let mut starts = Vec::new();
        let mut asks = 0;
        while !back.is_empty() {
            back.sort();
            let (at, holder) = back.remove(0);
            tokio::time::advance(at.saturating_duration_since(Instant::now())).await;
            asks += 1;
            match store.reserve_turn("k", &holder, rate).await.unwrap() {
                Turn::Now => {
                    let now = Instant::now();
                    assert!(now >= first_due[&holder], "{holder} started early");
                    starts.push(now);
                }
                Turn::Wait(wait) => {
                    let late = Duration::from_millis(fastrand::u64(0..700));
                    back.push((Instant::now() + wait + late, holder));
                }
            }
        }
        assert_eq!(starts.len(), 60);
        // At most the rate and its burst in any second, however late.
        let most = most_in(&starts, Duration::from_secs(1));
        assert!(most <= 10 + 2, "{most} starts within a second");
        // Late by up to 7 intervals on every return, a holder asks about
        // twice (the first ask, and once after its promise).
        assert!(asks <= 60 * 3, "{asks} asks for 60 starts");
    }

    #[tokio::test(start_paused = true)]
    async fn usage_of_an_unknown_key_is_empty_and_idle_keys_are_swept() {
        let store = MemoryStore::new();
        assert_eq!(store.limit_usage("k").await.unwrap(), LimitUsage::default());
        for i in 0..3_000 {
            let key = format!("k{i}");
            store.take_slot(&key, "a", 1, MS).await.unwrap();
            advance(MS).await;
        }
        let held = store.limits.lock().unwrap().keys.len();
        assert!(held < 2_100, "{held} keys kept, most of them idle");
    }
}
