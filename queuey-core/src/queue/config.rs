//! Per-queue settings.

use std::time::Duration;

use crate::{Error, RetryPolicy};

use super::QueueType;
use super::shard::{MAX_SHARDS, Shard, shard_name};

/// The longest queue name AMQP allows, in bytes.
pub const MAX_QUEUE_NAME_BYTES: usize = 255;

/// The longest message TTL RabbitMQ accepts: ten years.
const MAX_TTL_MS: u128 = 10 * 365 * 24 * 60 * 60 * 1000;

/// The settings of one logical queue.
///
/// Nothing is checked until [`validate`](QueueConfig::validate), which every
/// backend runs when it declares the queue: a bad value is an
/// [`Error::InvalidConfig`] naming the queue, never a panic.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::QueueConfig;
///
/// let config = QueueConfig::new("app.emails")
///     .prefetch(32)
///     .message_ttl(Duration::from_secs(3600))
///     .max_priority(5);
/// config.validate()?;
/// assert_eq!(config.settings().prefetch(), 32);
/// assert_eq!(config.top_priority(), 5);
///
/// // 0 declares the queue without priorities.
/// assert_eq!(QueueConfig::new("plain").max_priority(0).priority_levels(), None);
/// # Ok::<(), queuey_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub(crate) name: String,
    pub(crate) prefetch: u16,
    pub(crate) durable: bool,
    pub(crate) message_ttl: Option<Duration>,
    /// `max_priority` as set: `None` until set, `Some(0)` for "no priorities".
    pub(crate) max_priority: Option<u8>,
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) queue_type: QueueType,
    /// Broker queues the logical queue is spread over (1: not sharded).
    pub(crate) shards: u16,
    /// Set on the settings of one shard's broker queue.
    pub(crate) shard: Option<Shard>,
}

impl QueueConfig {
    /// Unacknowledged deliveries a consumer may hold by default.
    pub const DEFAULT_PREFETCH: u16 = 16;
    /// The default number of priority levels above 0.
    pub const DEFAULT_MAX_PRIORITY: u8 = 10;

    /// A queue with the defaults: a classic queue, prefetch 16, durable, no
    /// message TTL, priorities 0 to 10, no retry policy of its own.
    pub fn new(name: impl Into<String>) -> Self {
        QueueConfig {
            name: name.into(),
            prefetch: Self::DEFAULT_PREFETCH,
            durable: true,
            message_ttl: None,
            max_priority: None,
            retry: None,
            queue_type: QueueType::Classic,
            shards: 1,
            shard: None,
        }
    }

    /// How many unacknowledged deliveries one consumer may hold (default 16).
    /// [`validate`](QueueConfig::validate) refuses 0, which AMQP reads as
    /// "unlimited" (the whole queue pushed into the worker's memory).
    pub fn prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Whether the queue survives a broker restart (default `true`). RabbitMQ
    /// 4.3 refuses transient queues that are not exclusive.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Messages waiting longer than this on the queue are discarded by the
    /// broker (`x-message-ttl`). Unset by default.
    pub fn message_ttl(mut self, ttl: Duration) -> Self {
        self.message_ttl = Some(ttl);
        self
    }

    /// The highest priority level (`x-max-priority`, default 10 on a classic
    /// queue). `0` declares the queue without priorities; deferred jobs then
    /// queue up FIFO. A [quorum](QueueType::Quorum) queue has no priorities:
    /// leave this unset (or 0) there.
    pub fn max_priority(mut self, max_priority: u8) -> Self {
        self.max_priority = Some(max_priority);
        self
    }

    /// The kind of broker queue to declare (default
    /// [`QueueType::Classic`]); see [`QueueType`].
    pub fn queue_type(mut self, queue_type: QueueType) -> Self {
        self.queue_type = queue_type;
        self
    }

    /// Spreads the queue over `shards` broker queues (default 1, at most
    /// [`MAX_SHARDS`]) to carry more than one can; see [`shard`](crate::shard)
    /// and [`physical`](QueueConfig::physical).
    pub fn shards(mut self, shards: u16) -> Self {
        self.shards = shards;
        self
    }

    /// The retry policy for jobs on this queue whose job type sets none.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The highest priority level, or `None` for a queue without priorities
    /// (`max_priority(0)`, or a quorum queue).
    pub fn priority_levels(&self) -> Option<u8> {
        match (self.max_priority, self.queue_type) {
            (Some(0), _) => None,
            (Some(levels), _) => Some(levels),
            (None, QueueType::Quorum) => None,
            (None, _) => Some(Self::DEFAULT_MAX_PRIORITY),
        }
    }

    /// The priority a deferred job returns with: the highest level, or 0.
    pub fn top_priority(&self) -> u8 {
        self.priority_levels().unwrap_or(0)
    }

    /// Whether this is a [quorum](QueueType::Quorum) queue.
    pub fn is_quorum(&self) -> bool {
        self.queue_type == QueueType::Quorum
    }

    /// Which shard these settings (from [`physical`](QueueConfig::physical))
    /// declare; `None` for an unsharded queue and for the lane.
    pub fn shard(&self) -> Option<Shard> {
        self.shard
    }

    /// The broker queues behind this logical queue, which backends declare
    /// and a worker consumes: the queue itself, unchanged, when not sharded;
    /// else the lane (named like the queue), then each shard (`NAME.s0`, …).
    /// Each takes the prefetch over the number of shards, rounded up, so the
    /// shards together hold about what one queue would (the lane too).
    ///
    /// ```
    /// use queuey_core::QueueConfig;
    ///
    /// let queue = QueueConfig::new("app.emails").prefetch(32).shards(4);
    /// let physical = queue.physical();
    /// let names: Vec<&str> = physical.iter().map(|q| q.name()).collect();
    /// assert_eq!(names, ["app.emails", "app.emails.s0", "app.emails.s1", "app.emails.s2", "app.emails.s3"]);
    /// assert!(physical.iter().all(|q| q.settings().prefetch() == 8));
    /// assert_eq!(physical[2].shard().map(|s| s.index()), Some(1));
    /// ```
    pub fn physical(&self) -> Vec<QueueConfig> {
        if self.shards <= 1 || self.shard.is_some() {
            return vec![self.clone()];
        }
        self.physical_of(&(0..self.shards).collect::<Vec<_>>())
    }

    /// The lane and only the shards listed (each once, in order, the
    /// prefetch split over them), for a worker that takes part of a sharded
    /// queue; every shard needs some worker. An empty list, a shard the queue
    /// lacks, or an unsharded queue is an [`Error::InvalidConfig`].
    ///
    /// ```
    /// use queuey_core::QueueConfig;
    ///
    /// let queue = QueueConfig::new("app.emails").prefetch(32).shards(8);
    /// let some = queue.physical_only(&[6, 7])?;
    /// let names: Vec<&str> = some.iter().map(|q| q.name()).collect();
    /// assert_eq!(names, ["app.emails", "app.emails.s6", "app.emails.s7"]);
    /// assert!(some.iter().all(|q| q.settings().prefetch() == 16));
    /// assert!(queue.physical_only(&[8]).is_err());
    /// # Ok::<(), queuey_core::Error>(())
    /// ```
    pub fn physical_only(&self, shards: &[u16]) -> Result<Vec<QueueConfig>, Error> {
        if self.shards <= 1 || self.shard.is_some() {
            return Err(Error::invalid_config(format!(
                "queue `{}` is not sharded: a worker takes all of it; remove the shards given for \
                 it",
                self.name
            )));
        }
        let mut listed: Vec<u16> = shards.to_vec();
        listed.sort_unstable();
        listed.dedup();
        match listed.last() {
            None => Err(Error::invalid_config(format!(
                "no shard of queue `{}` given: list at least one of 0 to {}",
                self.name,
                self.shards - 1
            ))),
            Some(&last) if last >= self.shards => Err(Error::invalid_config(format!(
                "queue `{}` has shards 0 to {}, not shard {last}",
                self.name,
                self.shards - 1
            ))),
            Some(_) => Ok(self.physical_of(&listed)),
        }
    }

    /// The lane and the shards `indices`, the prefetch split over them.
    fn physical_of(&self, indices: &[u16]) -> Vec<QueueConfig> {
        let count = u16::try_from(indices.len()).unwrap_or(u16::MAX).max(1);
        let share = self.prefetch.div_ceil(count).max(1);
        let one = |name: String, shard: Option<Shard>| QueueConfig {
            name,
            prefetch: share,
            shards: 1,
            shard,
            ..self.clone()
        };
        let mut all = Vec::with_capacity(indices.len() + 1);
        all.push(one(self.name.clone(), None));
        for &index in indices {
            all.push(one(
                shard_name(&self.name, index),
                Some(Shard::new(index, self.shards)),
            ));
        }
        all
    }

    /// Checks every setting; backends call this before declaring anything.
    pub fn validate(&self) -> Result<(), Error> {
        validate_queue_name(&self.name)?;
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(Error::invalid_config(format!(
                "queue `{}`: shards must be between 1 and {MAX_SHARDS}, got {}",
                self.name, self.shards
            )));
        }
        if self.shards > 1 {
            // The longest shard name must fit too.
            validate_queue_name(&shard_name(&self.name, self.shards - 1)).map_err(|e| {
                Error::invalid_config(format!("a shard of queue `{}`: {e}", self.name))
            })?;
        }
        if self.prefetch == 0 {
            return Err(Error::invalid_config(format!(
                "queue `{}`: prefetch must be at least 1 (AMQP reads 0 as unlimited)",
                self.name
            )));
        }
        if let Some(ttl) = self.message_ttl {
            let ms = ttl.as_millis();
            if ms == 0 || ms > MAX_TTL_MS {
                return Err(Error::invalid_config(format!(
                    "queue `{}`: message_ttl must be between 1 ms and 10 years, got {ttl:?}",
                    self.name
                )));
            }
        }
        if self.is_quorum() {
            if let Some(levels @ 1..) = self.max_priority {
                return Err(Error::invalid_config(format!(
                    "queue `{}`: a quorum queue has no priority levels, but max_priority is \
                     {levels}; remove max_priority (deferred jobs then return in FIFO order) or \
                     use a classic queue",
                    self.name
                )));
            }
            if !self.durable {
                return Err(Error::invalid_config(format!(
                    "queue `{}`: a quorum queue is always durable; remove durable(false) or use \
                     a classic queue",
                    self.name
                )));
            }
        }
        Ok(())
    }
}

/// Two configurations are equal when they declare the same queue: a
/// `max_priority` set to the default counts as unset.
impl PartialEq for QueueConfig {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.prefetch == other.prefetch
            && self.durable == other.durable
            && self.message_ttl == other.message_ttl
            && self.priority_levels() == other.priority_levels()
            && self.retry == other.retry
            && self.queue_type == other.queue_type
            && self.shards == other.shards
            && self.shard == other.shard
    }
}

/// Checks a queue name against AMQP's and RabbitMQ's rules: not empty or
/// blank, at most 255 bytes, no `amq.` prefix (reserved by the broker).
pub(crate) fn validate_queue_name(name: &str) -> Result<(), Error> {
    if name.trim().is_empty() {
        return Err(Error::invalid_config(format!(
            "queue name `{name}` is empty or blank"
        )));
    }
    if name.len() > MAX_QUEUE_NAME_BYTES {
        return Err(Error::invalid_config(format!(
            "queue name `{name}` is {} bytes, over the {MAX_QUEUE_NAME_BYTES}-byte AMQP limit",
            name.len()
        )));
    }
    if name.starts_with("amq.") {
        return Err(Error::invalid_config(format!(
            "queue name `{name}` starts with `amq.`, which RabbitMQ reserves for itself"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = QueueConfig::new("q");
        assert_eq!(c.name(), "q");
        assert_eq!(c.settings().prefetch(), 16);
        assert!(c.settings().durable());
        assert_eq!(c.settings().message_ttl(), None);
        assert_eq!(c.priority_levels(), Some(10));
        assert_eq!(c.top_priority(), 10);
        assert_eq!(c.settings().retry(), None);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn max_priority_zero_means_none() {
        let c = QueueConfig::new("q").max_priority(0);
        assert_eq!(c.priority_levels(), None);
        assert_eq!(c.top_priority(), 0);
        assert_eq!(QueueConfig::new("q").max_priority(255).top_priority(), 255);
    }

    #[test]
    fn prefetch_zero_is_refused() {
        let e = QueueConfig::new("q").prefetch(0).validate().unwrap_err();
        assert!(e.to_string().contains("prefetch must be at least 1"), "{e}");
    }

    #[test]
    fn ttl_bounds() {
        assert!(
            QueueConfig::new("q")
                .message_ttl(Duration::from_micros(10))
                .validate()
                .is_err()
        );
        assert!(
            QueueConfig::new("q")
                .message_ttl(Duration::from_millis(1))
                .validate()
                .is_ok()
        );
        assert!(
            QueueConfig::new("q")
                .message_ttl(Duration::from_secs(11 * 365 * 24 * 3600))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn names() {
        for bad in ["", "   ", "amq.foo"] {
            assert!(QueueConfig::new(bad).validate().is_err(), "{bad:?}");
        }
        assert!(QueueConfig::new("x".repeat(255)).validate().is_ok());
        assert!(QueueConfig::new("x".repeat(256)).validate().is_err());
        // 128 two-byte characters are 256 bytes: the limit is bytes, not chars.
        let e = QueueConfig::new("é".repeat(128)).validate().unwrap_err();
        assert!(e.to_string().contains("256 bytes"), "{e}");
    }

    #[test]
    fn a_quorum_queue_has_no_priorities_by_default() {
        let c = QueueConfig::new("q").queue_type(QueueType::Quorum);
        assert!(c.is_quorum());
        assert_eq!(c.priority_levels(), None);
        assert_eq!(c.top_priority(), 0);
        assert!(c.validate().is_ok());
        assert!(c.clone().max_priority(0).validate().is_ok());
    }

    #[test]
    fn a_quorum_queue_refuses_priorities_and_transience() {
        for c in [
            QueueConfig::new("q")
                .max_priority(3)
                .queue_type(QueueType::Quorum),
            QueueConfig::new("q")
                .queue_type(QueueType::Quorum)
                .max_priority(3),
        ] {
            let err = c.validate().unwrap_err().to_string();
            assert!(
                err.contains("queue `q`") && err.contains("max_priority") && err.contains("FIFO"),
                "{err}"
            );
        }
        let err = QueueConfig::new("q")
            .queue_type(QueueType::Quorum)
            .durable(false)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("always durable") && err.contains("durable(false)"),
            "{err}"
        );
    }

    #[test]
    fn an_explicit_default_priority_equals_an_unset_one() {
        assert_eq!(
            QueueConfig::new("q").max_priority(10),
            QueueConfig::new("q")
        );
        assert_ne!(QueueConfig::new("q").max_priority(0), QueueConfig::new("q"));
        assert_ne!(
            QueueConfig::new("q").queue_type(QueueType::Quorum),
            QueueConfig::new("q")
        );
    }
}
