//! The channels hold queues are declared on: a fixed set of slots, each
//! used by one declaration at a time.

use lapin::{Channel, Connection};
use queuey_core::{Error, QueueConfig};
use tokio::sync::{Mutex, MutexGuard, Semaphore, SemaphorePermit};

use super::{declare, explain, new_channel};
use crate::topology::HoldQueues;

/// How many channels hold queues are declared on.
pub(crate) const HOLD_DECLARATION_CHANNELS: usize = 8;

/// The channels hold queues are declared on: up to
/// [`HOLD_DECLARATION_CHANNELS`] slots, each holding a channel (or none,
/// until one is opened) that one declaration at a time may use, so
/// concurrent holds do not queue up behind one round trip apiece. A
/// declaration takes the lowest free slot, so more channels are opened
/// only under concurrency; a refusal that closed one is reopened.
#[derive(Debug)]
pub(crate) struct HoldDeclarer {
    slots: Box<[Mutex<Option<Channel>>]>,
    /// One permit per slot: holding one guarantees a free slot.
    permits: Semaphore,
}

/// A slot taken for one declaration; it is free again when dropped.
type Slot<'a> = (SemaphorePermit<'a>, MutexGuard<'a, Option<Channel>>);

impl HoldDeclarer {
    /// A declarer of `channels` slots (at least one).
    pub(crate) fn new(channels: usize) -> Self {
        let size = channels.max(1);
        HoldDeclarer {
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
            permits: Semaphore::new(size),
        }
    }

    /// Declares the hold queue `hold` of the family `holds` for `config`'s
    /// queue, waiting for the broker's answer (only that renews a classic
    /// hold's lease), and returns how many consumers it has.
    pub(crate) async fn declare(
        &self,
        connection: &Connection,
        hold: &str,
        holds: HoldQueues,
        config: &QueueConfig,
        ttl_ms: u64,
    ) -> Result<u32, Error> {
        let args = holds.arguments(config.name(), ttl_ms);
        // A quorum queue is always durable; a classic hold lives as long as
        // its work queue would.
        let durable = holds == HoldQueues::Quorum || config.settings().durable();
        let (_permit, mut slot) = self.take().await?;
        let channel = match slot.as_ref() {
            Some(channel) if channel.status().connected() => channel.clone(),
            _ => {
                *slot = None;
                slot.insert(new_channel(connection, "opening a hold-queue channel").await?)
                    .clone()
            }
        };
        let result = declare(connection, &channel, hold, durable, &args).await;
        if !channel.status().connected() {
            *slot = None;
        }
        result.map_err(|f| explain(f, hold, config))
    }

    /// Waits for a free slot and takes the lowest one.
    async fn take(&self) -> Result<Slot<'_>, Error> {
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

    /// Closes the declarer: later declarations fail with [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.permits.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_lowest_free_slot_is_taken() {
        let pool = HoldDeclarer::new(3);
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
        let pool = HoldDeclarer::new(1);
        pool.close();
        assert!(matches!(pool.take().await, Err(Error::ShutDown)));
    }
}
