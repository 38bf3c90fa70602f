//! A store in one process.

mod limits;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use tokio::time::Instant;

use super::{Inserted, Store, StoreError, ttl_ms};

/// A [`Store`] and [`LimitStore`](super::LimitStore) in this process's
/// memory: for tests, the memory backend and a single worker process.
/// Clones share their keys and limits.
///
/// Time is tokio's, so tests with paused time see keys expire and leases
/// end as a fleet's store would. Expired keys and idle limits are swept as
/// new ones arrive, so the maps hold about as many as are live.
#[derive(Clone, Default)]
pub struct MemoryStore {
    keys: Arc<Mutex<Keys>>,
    limits: Arc<Mutex<limits::Limits>>,
}

#[derive(Default)]
struct Keys {
    live: HashMap<String, Entry>,
    /// Sweep when the map has grown to this many keys.
    sweep_at: usize,
}

struct Entry {
    value: String,
    expires: Instant,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// How many keys are live now.
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.with(|keys| keys.live.values().filter(|e| e.expires > now).count())
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn with<T>(&self, f: impl FnOnce(&mut Keys) -> T) -> T {
        f(&mut crate::lock(&self.keys))
    }
}

impl Keys {
    /// The live entry of `key`, dropping it first if it has expired.
    fn live(&mut self, key: &str, now: Instant) -> Option<&mut Entry> {
        if self.live.get(key).is_some_and(|e| e.expires <= now) {
            self.live.remove(key);
        }
        self.live.get_mut(key)
    }

    fn put(&mut self, key: &str, value: &str, ttl: Duration, now: Instant) {
        if self.live.len() >= self.sweep_at {
            self.live.retain(|_, e| e.expires > now);
            self.sweep_at = (self.live.len() * 2).max(1024);
        }
        self.live.insert(
            key.to_owned(),
            Entry {
                value: value.to_owned(),
                expires: expiry(now, ttl),
            },
        );
    }
}

fn expiry(now: Instant, ttl: Duration) -> Instant {
    now.checked_add(Duration::from_millis(ttl_ms(ttl)))
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("keys", &self.len())
            .finish()
    }
}

impl Store for MemoryStore {
    fn insert<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        let now = Instant::now();
        let answer = self.with(|keys| match keys.live(key, now) {
            Some(entry) => Inserted::Exists(entry.value.clone()),
            None => {
                keys.put(key, value, ttl, now);
                Inserted::New
            }
        });
        futures::future::ready(Ok(answer)).boxed()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let now = Instant::now();
        let answer = self.with(|keys| keys.live(key, now).map(|e| e.value.clone()));
        futures::future::ready(Ok(answer)).boxed()
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let now = Instant::now();
        self.with(|keys| keys.put(key, value, ttl, now));
        futures::future::ready(Ok(())).boxed()
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let now = Instant::now();
        let answer = self.with(|keys| match keys.live(key, now) {
            Some(entry) if entry.value == value => {
                entry.expires = expiry(now, ttl);
                true
            }
            _ => false,
        });
        futures::future::ready(Ok(answer)).boxed()
    }

    fn remove<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let now = Instant::now();
        let answer = self.with(|keys| {
            let holds = keys.live(key, now).is_some_and(|e| e.value == value);
            if holds {
                keys.live.remove(key);
            }
            holds
        });
        futures::future::ready(Ok(answer)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn a_key_is_claimed_once_until_it_expires() {
        let store = MemoryStore::new();
        assert_eq!(store.insert("k", "a", MINUTE).await.unwrap(), Inserted::New);
        assert_eq!(
            store.insert("k", "b", MINUTE).await.unwrap(),
            Inserted::Exists("a".into())
        );
        tokio::time::advance(MINUTE - Duration::from_millis(1)).await;
        assert_eq!(store.get("k").await.unwrap().as_deref(), Some("a"));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(store.get("k").await.unwrap(), None);
        assert_eq!(store.insert("k", "b", MINUTE).await.unwrap(), Inserted::New);
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_holder_extends_or_removes_a_key() {
        let store = MemoryStore::new();
        store.insert("k", "a", MINUTE).await.unwrap();
        assert!(!store.extend("k", "b", 2 * MINUTE).await.unwrap());
        assert!(store.extend("k", "a", 2 * MINUTE).await.unwrap());
        tokio::time::advance(MINUTE + Duration::from_secs(1)).await;
        assert_eq!(store.get("k").await.unwrap().as_deref(), Some("a"));
        assert!(!store.remove("k", "b").await.unwrap());
        assert!(store.remove("k", "a").await.unwrap());
        assert!(!store.remove("k", "a").await.unwrap());
        assert!(store.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn set_overwrites_and_an_expired_key_is_not_extended() {
        let store = MemoryStore::new();
        store.insert("k", "a", MINUTE).await.unwrap();
        store.set("k", "done", MINUTE).await.unwrap();
        assert_eq!(store.get("k").await.unwrap().as_deref(), Some("done"));
        tokio::time::advance(MINUTE).await;
        assert!(!store.extend("k", "done", MINUTE).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn expired_keys_are_swept_as_new_ones_arrive() {
        let store = MemoryStore::new();
        for i in 0..5_000 {
            store
                .insert(&format!("k{i}"), "v", Duration::from_millis(10))
                .await
                .unwrap();
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let held = store.with(|keys| keys.live.len());
        assert!(held < 2_100, "{held} keys held, most of them expired");
        assert!(store.len() <= 10);
    }
}
