//! Leadership in one process: one lease per schedule key at a time.
//!
//! The first scheduler on a [`MemoryBackend`] to ask for a key leads it until
//! it releases or drops its lease; the next one waiting takes over with the
//! last tick recorded.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures::future::BoxFuture;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::time::Instant;

use super::MemoryBackend;
use crate::Error;
use crate::periodic::{Leadership, Lease};

/// The last tick of each key, each behind the lock its leader holds.
#[derive(Default)]
pub(crate) struct Leases {
    keys: Mutex<HashMap<String, Arc<AsyncMutex<Option<SystemTime>>>>>,
}

impl Leases {
    fn slot(&self, key: &str) -> Arc<AsyncMutex<Option<SystemTime>>> {
        let mut keys = crate::lock(&self.keys);
        Arc::clone(keys.entry(key.to_owned()).or_default())
    }
}

struct MemoryLease {
    key: String,
    last: OwnedMutexGuard<Option<SystemTime>>,
}

impl fmt::Debug for MemoryLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryLease")
            .field("key", &self.key)
            .field("last_tick", &*self.last)
            .finish()
    }
}

impl Lease for MemoryLease {
    fn last_tick(&self) -> Option<SystemTime> {
        *self.last
    }

    fn hold_until<'a>(&'a mut self, deadline: Instant) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            tokio::time::sleep_until(deadline).await;
            Ok(())
        })
    }

    fn record<'a>(&'a mut self, tick: SystemTime) -> BoxFuture<'a, Result<(), Error>> {
        *self.last = Some(self.last.map_or(tick, |last| last.max(tick)));
        Box::pin(futures::future::ready(Ok(())))
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, ()> {
        drop(self);
        Box::pin(futures::future::ready(()))
    }
}

impl Leadership for MemoryBackend {
    fn lead<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Box<dyn Lease>, Error>> {
        Box::pin(async move {
            let slot = self.shared.leases.slot(key);
            let last = slot.lock_owned().await;
            Ok(Box::new(MemoryLease {
                key: key.to_owned(),
                last,
            }) as Box<dyn Lease>)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_leader_per_key_and_the_next_sees_the_last_tick() {
        let backend = MemoryBackend::new();
        let mut first = backend.lead("k").await.unwrap();
        assert_eq!(first.last_tick(), None);
        let tick = UNIX_EPOCH + Duration::from_secs(5);
        first.record(tick).await.unwrap();

        let other = backend.clone();
        let waiting = tokio::spawn(async move { other.lead("k").await.unwrap().last_tick() });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        // Another key is free.
        assert!(backend.lead("j").await.is_ok());

        first.release().await;
        assert_eq!(waiting.await.unwrap(), Some(tick));
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_never_goes_back() {
        let backend = MemoryBackend::new();
        let mut lease = backend.lead("k").await.unwrap();
        let later = UNIX_EPOCH + Duration::from_secs(9);
        lease.record(later).await.unwrap();
        lease.record(UNIX_EPOCH).await.unwrap();
        assert_eq!(lease.last_tick(), Some(later));
    }
}
