//! The channels hold queues are declared on.

use lapin::Connection;
use queuey_core::{Error, QueueConfig};

use super::pool::ChannelPool;
use super::{declare_counting, explain, new_channel};
use crate::topology::HoldQueues;

/// How many channels hold queues are declared on.
pub(crate) const HOLD_DECLARATION_CHANNELS: usize = 8;

/// The channels hold queues are declared on: up to
/// [`HOLD_DECLARATION_CHANNELS`], each used by one declaration at a time
/// (so concurrent holds do not queue up behind one round trip apiece),
/// opened on first use and reopened after a refusal closed one.
#[derive(Debug)]
pub(crate) struct HoldDeclarer {
    pool: ChannelPool,
}

impl HoldDeclarer {
    pub(crate) fn new(channels: usize) -> Self {
        HoldDeclarer {
            pool: ChannelPool::new(channels),
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
        let (_permit, mut slot) = self.pool.take().await?;
        let channel = match slot.as_ref() {
            Some(channel) if channel.status().connected() => channel.clone(),
            _ => {
                *slot = None;
                slot.insert(new_channel(connection, "opening a hold-queue channel").await?)
                    .clone()
            }
        };
        let result = declare_counting(connection, &channel, hold, durable, &args).await;
        if !channel.status().connected() {
            *slot = None;
        }
        result.map_err(|f| explain(f, hold, config))
    }

    /// Closes the declarer: later declarations fail with [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.pool.close();
    }
}
