//! What this process's limits hold and hold back, per key, for the
//! workers' heartbeats: the operator's view of the limits without a store
//! of its own.
//!
//! One book per process, written by every limit layer in it: a key enters
//! when a job of it takes a slot or is told to wait, and leaves once it
//! holds no slot and [`FORGET_AFTER`] passed since it was last seen, so the
//! book stays as small as the keys in use. Each heartbeat lists the
//! busiest [`MAX_LIMITS_LISTED`] keys.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use queuey_core::control::{LimitSeen, MAX_LIMITS_LISTED};
use tokio::time::Instant;

use queuey_core::store::Rate;

/// How long a key that holds no slot stays in the book after it was last
/// seen.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// The process's book, keyed by the key's name in the store.
static BOOK: LazyLock<Mutex<HashMap<Arc<str>, Entry>>> = LazyLock::new(Mutex::default);

/// The book, even if a writer panicked: its counts stay usable.
fn book() -> MutexGuard<'static, HashMap<Arc<str>, Entry>> {
    BOOK.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Entry {
    seen: LimitSeen,
    last: Instant,
}

/// One key of one limit, as a layer knows it.
pub(crate) struct Keyed<'a> {
    pub(crate) name: &'a str,
    pub(crate) concurrency: Option<u32>,
    pub(crate) rate: Option<Rate>,
    /// The key's name in the store, which is its name in the book too.
    pub(crate) store_key: &'a Arc<str>,
    /// The key, as the layer's key function gave it.
    pub(crate) key: &'a str,
}

/// Runs `change` on the entry of `keyed`, making it if needed.
fn note(keyed: Keyed<'_>, change: impl FnOnce(&mut LimitSeen)) {
    let now = Instant::now();
    let mut book = book();
    let entry = book
        .entry(Arc::clone(keyed.store_key))
        .or_insert_with(|| Entry {
            seen: LimitSeen {
                name: keyed.name.to_owned(),
                key: keyed.key.to_owned(),
                concurrency: keyed.concurrency,
                rate: keyed.rate.map(|rate| rate.to_string()),
                running: 0,
                waiting: 0,
                waits: 0,
            },
            last: now,
        });
    entry.last = now;
    change(&mut entry.seen);
}

/// A job of the key took one of its running slots.
pub(crate) fn took(keyed: Keyed<'_>) {
    note(keyed, |seen| seen.running += 1);
}

/// A job of the key gave its running slot back.
pub(crate) fn freed(keyed: Keyed<'_>) {
    note(keyed, |seen| seen.running = seen.running.saturating_sub(1));
}

/// A job of the key was told to wait (for a turn, a slot or the store);
/// `waiting`, when it found every slot held, is how many wait for one
/// across the fleet, as the store counts.
pub(crate) fn waited(keyed: Keyed<'_>, waiting: Option<u32>) {
    note(keyed, |seen| {
        seen.waits += 1;
        if let Some(waiting) = waiting {
            seen.waiting = waiting;
        }
    });
}

/// The busiest keys of the book (most running, then most waiting), at
/// most [`MAX_LIMITS_LISTED`]; keys idle for [`FORGET_AFTER`] are dropped.
pub(crate) fn listed() -> Vec<LimitSeen> {
    let mut book = book();
    book.retain(|_, entry| entry.seen.running > 0 || entry.last.elapsed() < FORGET_AFTER);
    let mut listed: Vec<LimitSeen> = book.values().map(|entry| entry.seen.clone()).collect();
    listed.sort_by(|a, b| {
        (b.running, b.waiting, b.waits)
            .cmp(&(a.running, a.waiting, a.waits))
            .then_with(|| (&a.name, &a.key).cmp(&(&b.name, &b.key)))
    });
    listed.truncate(MAX_LIMITS_LISTED);
    listed
}
