//! The kind of broker queue a logical queue is declared as.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The kind of broker queue a work queue (and its dead-letter queue) is
/// declared as.
///
/// - [`QueueType::Classic`] (the default): a single-node queue with
///   priorities, so deferred jobs return ahead of the backlog.
/// - [`QueueType::Quorum`]: replicated across a RabbitMQ cluster (Raft), to
///   survive losing a node. Always durable, without priorities (so no
///   `max_priority` above 0; deferred jobs return FIFO, behind the backlog).
///   Backends without such queues treat it as classic.
///
/// ```
/// use queuey_core::{QueueConfig, QueueType};
///
/// let config = QueueConfig::new("app.payments").queue_type(QueueType::Quorum);
/// config.validate()?;
/// assert!(config.is_quorum());
/// // Quorum queues have no priority levels: deferrals are FIFO.
/// assert_eq!(config.priority_levels(), None);
///
/// assert_eq!("quorum".parse::<QueueType>()?, QueueType::Quorum);
/// # Ok::<(), queuey_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum QueueType {
    /// A classic, single-node queue (the default).
    #[default]
    Classic,
    /// A replicated quorum queue.
    Quorum,
}

impl QueueType {
    /// The name RabbitMQ gives this type (`x-queue-type`).
    pub const fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for QueueType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "classic" => Ok(QueueType::Classic),
            "quorum" => Ok(QueueType::Quorum),
            other => Err(Error::invalid_config(format!(
                "unknown queue type `{other}`: use `classic` or `quorum`"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in [QueueType::Classic, QueueType::Quorum] {
            assert_eq!(kind.as_str().parse::<QueueType>().unwrap(), kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
        let err = "stream".parse::<QueueType>().unwrap_err().to_string();
        assert!(err.contains("`stream`") && err.contains("quorum"), "{err}");
    }
}
