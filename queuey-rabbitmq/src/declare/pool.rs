//! A fixed set of channel slots, each used by one operation at a time.

use lapin::Channel;
use queuey_core::Error;
use tokio::sync::{Mutex, MutexGuard, Semaphore, SemaphorePermit};

/// Channel slots, each holding a channel (or none, until one is opened)
/// that one operation at a time may use; an operation takes the lowest free
/// slot, so more channels are opened only under concurrency.
#[derive(Debug)]
pub(crate) struct ChannelPool {
    slots: Box<[Mutex<Option<Channel>>]>,
    /// One permit per slot: holding one guarantees a free slot.
    permits: Semaphore,
}

/// A slot taken for one operation; it is free again when dropped.
pub(crate) type Slot<'a> = (SemaphorePermit<'a>, MutexGuard<'a, Option<Channel>>);

impl ChannelPool {
    /// A pool of `size` slots (at least one).
    pub(crate) fn new(size: usize) -> Self {
        let size = size.max(1);
        ChannelPool {
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
            permits: Semaphore::new(size),
        }
    }

    /// Waits for a free slot and takes the lowest one.
    pub(crate) async fn take(&self) -> Result<Slot<'_>, Error> {
        let permit = self.permits.acquire().await.map_err(|_| Error::ShutDown)?;
        for slot in self.slots.iter() {
            if let Ok(guard) = slot.try_lock() {
                return Ok((permit, guard));
            }
        }
        // Unreachable while every holder of a slot holds a permit; waiting is
        // still correct if it ever happens.
        Ok((permit, self.slots[0].lock().await))
    }

    /// Closes the pool: later operations fail with [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.permits.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_lowest_free_slot_is_taken() {
        let pool = ChannelPool::new(3);
        let first = pool.take().await.unwrap();
        let second = pool.take().await.unwrap();
        assert!(pool.slots[0].try_lock().is_err() && pool.slots[1].try_lock().is_err());
        assert!(pool.slots[2].try_lock().is_ok());
        drop(first);
        // Slot 0 is free again and is taken before slot 2.
        let third = pool.take().await.unwrap();
        assert!(pool.slots[0].try_lock().is_err());
        assert!(pool.slots[1].try_lock().is_err());
        assert!(pool.slots[2].try_lock().is_ok());
        drop((second, third));
    }

    #[tokio::test]
    async fn a_closed_pool_refuses() {
        let pool = ChannelPool::new(1);
        pool.close();
        assert!(matches!(pool.take().await, Err(Error::ShutDown)));
    }
}
