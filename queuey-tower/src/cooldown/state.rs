//! The cool-downs themselves: a map from key to the instant its cool-down
//! ends, shared by every clone of a layer.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::COOLDOWN_KEYS;

/// Cool-downs by key. Expired keys are dropped as the map grows, so memory
/// is bounded by the keys cooling down at once, not by every key ever seen.
#[derive(Debug)]
pub(crate) struct Cooldowns<K> {
    inner: Mutex<Inner<K>>,
    name: &'static str,
}

#[derive(Debug)]
struct Inner<K> {
    until: HashMap<K, Instant>,
    /// The size at which expired keys are swept next.
    sweep_at: usize,
}

/// The first size at which expired keys are swept.
const FIRST_SWEEP: usize = 64;

impl<K: Hash + Eq> Cooldowns<K> {
    pub(crate) fn new(name: &'static str) -> Self {
        Cooldowns {
            inner: Mutex::new(Inner {
                until: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            }),
            name,
        }
    }

    /// The layer's name, its metrics label.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// How long `key` still cools down, if it does.
    pub(crate) fn remaining(&self, key: &K, now: Instant) -> Option<Duration> {
        let inner = crate::lock(&self.inner);
        let until = *inner.until.get(key)?;
        (until > now).then(|| until - now)
    }

    /// Starts (or extends) a cool-down of `key` until `now + wait`. A
    /// shorter wait never shortens a running cool-down.
    pub(crate) fn cool(&self, key: K, now: Instant, wait: Duration) {
        let until = now + wait;
        let mut inner = crate::lock(&self.inner);
        let entry = inner.until.entry(key).or_insert(until);
        if *entry < until {
            *entry = until;
        }
        if inner.until.len() >= inner.sweep_at {
            inner.until.retain(|_, until| *until > now);
            inner.sweep_at = (inner.until.len() * 2).max(FIRST_SWEEP);
        }
        let cooling = inner.until.values().filter(|until| **until > now).count();
        drop(inner);
        metrics::gauge!(COOLDOWN_KEYS, "layer" => self.name).set(cooling as f64);
    }

    /// How many keys the map holds (cooling or expired but not yet swept).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        crate::lock(&self.inner).until.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_cool_down_runs_out_and_is_never_shortened() {
        let cooldowns = Cooldowns::new("t");
        let now = Instant::now();
        cooldowns.cool("api", now, Duration::from_secs(30));
        cooldowns.cool("api", now, Duration::from_secs(5));
        assert_eq!(
            cooldowns.remaining(&"api", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(cooldowns.remaining(&"other", now), None);
        let later = now + Duration::from_secs(30);
        assert_eq!(cooldowns.remaining(&"api", later), None);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_keys_are_swept_as_the_map_grows() {
        let cooldowns = Cooldowns::new("t");
        let start = Instant::now();
        for n in 0..1000u32 {
            // Each key cools for 1 s, one key per 10 ms: at most ~100 at once.
            let now = start + Duration::from_millis(10 * u64::from(n));
            cooldowns.cool(n, now, Duration::from_secs(1));
        }
        assert!(
            cooldowns.len() <= 2 * 101 + FIRST_SWEEP,
            "{}",
            cooldowns.len()
        );
    }
}
