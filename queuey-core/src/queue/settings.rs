//! The read-only view of a [`QueueConfig`]'s settings.

use std::fmt;
use std::time::Duration;

use crate::{QueueConfig, QueueType, RetryPolicy};

/// What was set on a [`QueueConfig`], read back under the builder methods'
/// own names: [`QueueConfig::prefetch`] sets it, `settings().prefetch()`
/// reads it. Get one with [`QueueConfig::settings`].
///
/// ```
/// use std::time::Duration;
/// use queuey_core::QueueConfig;
///
/// let config = QueueConfig::new("app.emails")
///     .prefetch(32)
///     .message_ttl(Duration::from_secs(3600));
/// let settings = config.settings();
/// assert_eq!(settings.prefetch(), 32);
/// assert_eq!(settings.message_ttl(), Some(Duration::from_secs(3600)));
/// assert!(settings.durable());
/// assert_eq!(settings.max_priority(), QueueConfig::DEFAULT_MAX_PRIORITY);
/// assert_eq!(settings.retry(), None);
/// ```
#[derive(Clone, Copy)]
pub struct QueueSettings<'a> {
    config: &'a QueueConfig,
}

impl QueueConfig {
    /// What was set, read back under the builder methods' names:
    /// `settings().prefetch()`, `settings().message_ttl()`, ...
    pub fn settings(&self) -> QueueSettings<'_> {
        QueueSettings { config: self }
    }
}

impl<'a> QueueSettings<'a> {
    /// How many unacknowledged deliveries one consumer may hold
    /// ([`QueueConfig::prefetch`]).
    pub fn prefetch(&self) -> u16 {
        self.config.prefetch
    }

    /// Whether the queue survives a broker restart ([`QueueConfig::durable`]).
    pub fn durable(&self) -> bool {
        self.config.durable
    }

    /// The message TTL, if one was set ([`QueueConfig::message_ttl`]).
    pub fn message_ttl(&self) -> Option<Duration> {
        self.config.message_ttl
    }

    /// The highest priority level, `0` for a queue without priorities
    /// ([`QueueConfig::max_priority`]).
    pub fn max_priority(&self) -> u8 {
        self.config.priority_levels().unwrap_or(0)
    }

    /// The queue's own retry policy, if one was set ([`QueueConfig::retry`]).
    pub fn retry(&self) -> Option<&'a RetryPolicy> {
        self.config.retry.as_ref()
    }

    /// The kind of broker queue ([`QueueConfig::queue_type`]).
    pub fn queue_type(&self) -> QueueType {
        self.config.queue_type
    }

    /// How many broker queues the logical queue is spread over, 1 when it
    /// is not sharded ([`QueueConfig::shards`]).
    pub fn shards(&self) -> u16 {
        self.config.shards
    }
}

impl fmt::Debug for QueueSettings<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueSettings")
            .field("prefetch", &self.prefetch())
            .field("durable", &self.durable())
            .field("message_ttl", &self.message_ttl())
            .field("max_priority", &self.max_priority())
            .field("queue_type", &self.queue_type())
            .field("shards", &self.shards())
            .field("retry", &self.retry())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_read_back() {
        let config = QueueConfig::new("q");
        let s = config.settings();
        assert_eq!(s.prefetch(), QueueConfig::DEFAULT_PREFETCH);
        assert!(s.durable());
        assert_eq!(s.message_ttl(), None);
        assert_eq!(s.max_priority(), QueueConfig::DEFAULT_MAX_PRIORITY);
        assert_eq!(s.retry(), None);
    }

    #[test]
    fn every_setter_reads_back_under_its_own_name() {
        let policy = RetryPolicy::never();
        let config = QueueConfig::new("q")
            .prefetch(3)
            .durable(false)
            .message_ttl(Duration::from_secs(5))
            .max_priority(0)
            .retry(policy.clone());
        let s = config.settings();
        assert_eq!(s.prefetch(), 3);
        assert!(!s.durable());
        assert_eq!(s.message_ttl(), Some(Duration::from_secs(5)));
        assert_eq!(s.max_priority(), 0);
        assert_eq!(s.retry(), Some(&policy));
        assert!(format!("{s:?}").contains("prefetch: 3"));
    }
}
