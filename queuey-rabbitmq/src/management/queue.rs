//! A queue as the management API reports it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A queue as the management API reports it (`GET /api/queues/{vhost}`).
///
/// Statistics (the counts, consumers, rates) are absent until the broker's
/// first statistics emission after the queue was declared, and lag behind
/// by up to the emission interval (`collect_statistics_interval`, 5 s by
/// default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueInfo {
    /// The name.
    pub name: String,
    /// Durable or not.
    #[serde(default)]
    pub durable: bool,
    /// Auto-delete or not.
    #[serde(default)]
    pub auto_delete: bool,
    /// Exclusive or not.
    #[serde(default)]
    pub exclusive: bool,
    /// `classic`, `quorum` or `stream`.
    #[serde(rename = "type")]
    pub queue_type: Option<String>,
    /// The declared arguments.
    #[serde(default)]
    pub arguments: BTreeMap<String, Value>,
    /// Every message the queue holds: for a quorum queue, those past their
    /// time to live that wait to be dead-lettered included (statistics).
    pub messages: Option<u64>,
    /// Messages ready for delivery (statistics).
    pub messages_ready: Option<u64>,
    /// Messages delivered and not acknowledged yet (statistics).
    pub messages_unacknowledged: Option<u64>,
    /// Consumers (statistics).
    pub consumers: Option<u64>,
    /// When the queue became idle (absent while in use).
    pub idle_since: Option<String>,
    /// The user policy applied.
    pub policy: Option<String>,
    /// The operator policy applied.
    pub operator_policy: Option<String>,
    /// The keys the policies set, merged as the broker applies them.
    pub effective_policy_definition: Option<Value>,
    /// Publish and delivery counts and rates, when the broker collects them.
    pub message_stats: Option<Value>,
}

impl QueueInfo {
    /// A queue named `name` with nothing else known, for tests and
    /// builders.
    pub fn named(name: impl Into<String>) -> Self {
        QueueInfo {
            name: name.into(),
            ..QueueInfo::default()
        }
    }

    /// An integer argument.
    pub fn int_argument(&self, name: &str) -> Option<i64> {
        self.arguments.get(name).and_then(Value::as_i64)
    }

    /// The keys of the effective policy definition.
    pub fn policy_keys(&self) -> BTreeMap<String, Value> {
        match &self.effective_policy_definition {
            Some(Value::Object(map)) => map.clone().into_iter().collect(),
            _ => BTreeMap::new(),
        }
    }

    /// A rate from `message_stats` (`publish`, `deliver_get`, `ack`…), per
    /// second.
    pub fn rate(&self, stat: &str) -> Option<f64> {
        self.message_stats
            .as_ref()?
            .get(format!("{stat}_details"))?
            .get("rate")?
            .as_f64()
    }

    /// A count from `message_stats` (`publish`, `deliver_get`, `ack`…):
    /// how many since the queue was declared or its statistics reset.
    pub fn count(&self, stat: &str) -> Option<u64> {
        self.message_stats.as_ref()?.get(stat)?.as_u64()
    }

    /// For a quorum queue, the messages past their time to live that wait
    /// to be dead-lettered: `messages − messages_ready −
    /// messages_unacknowledged`. For a quorum hold queue, the jobs whose
    /// delay is over that the broker has not moved back to the work queue
    /// yet; AMQP counts none of them. `None` before the first statistics.
    pub fn releasing(&self) -> Option<u64> {
        let counted = self.messages?;
        let ready = self.messages_ready?;
        let unacked = self.messages_unacknowledged.unwrap_or(0);
        Some(counted.saturating_sub(ready.saturating_add(unacked)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_queue_shows_what_waits_to_be_dead_lettered() {
        let info: QueueInfo = serde_json::from_value(serde_json::json!({
            "name": "q.deferred.quorum.1000", "type": "quorum", "messages": 12,
            "messages_ready": 2, "messages_unacknowledged": 0,
            "message_stats": {"publish": 40, "publish_details": {"rate": 1.5}}
        }))
        .unwrap();
        assert_eq!(info.releasing(), Some(10));
        assert_eq!(info.count("publish"), Some(40));
        assert_eq!(info.rate("publish"), Some(1.5));
        // Before the first statistics emission: nothing is known.
        let fresh: QueueInfo = serde_json::from_value(serde_json::json!({"name": "q"})).unwrap();
        assert_eq!((fresh.releasing(), fresh.count("publish")), (None, None));
    }
}
