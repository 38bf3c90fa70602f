//! `topology verify` and `topology apply`: the broker against a queue set.
//!
//! A queue set ([`TopologySpec`], from TOML or the command line) is the
//! queues an application declares; their expected arguments come from
//! `queuey_rabbitmq::topology`, as the backend declares them (a sharded
//! queue: lane and every shard; a shard past the count is reported).
//! [`verify`] compares, [`plan_apply`]/[`apply`] declare what is missing,
//! and `limits` gives older queues their delivery limit by policy.

mod apply;
mod expected;
mod limits;
mod verify;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use queuey_core::{QueueConfig, QueueType};

use crate::error::{OpsError, Result};

pub(crate) use apply::{apply, plan_apply};
pub(crate) use limits::{
    AtRisk, BROKER_DEFAULT_LIMIT, LimitPolicy, apply_limit_policies, broker_has_default_limit,
    control_stream_policies, limit_policies, plan_control_stream_policy, plan_limit_policies,
    version_numbers,
};
pub(crate) use verify::{Problem, ProblemKind, verify};

fn default_dead_suffix() -> String {
    crate::DEFAULT_DEAD_SUFFIX.to_owned()
}
fn default_deferred_suffix() -> String {
    crate::DEFAULT_DEFERRED_SUFFIX.to_owned()
}
fn default_suspect_suffix() -> String {
    crate::DEFAULT_SUSPECT_SUFFIX.to_owned()
}
fn yes() -> bool {
    true
}
fn one() -> u16 {
    1
}

/// The queue set an application declares: its suffixes and work queues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TopologySpec {
    #[serde(default = "default_dead_suffix")]
    pub(crate) dead_suffix: String,
    #[serde(default = "default_deferred_suffix")]
    pub(crate) deferred_suffix: String,
    #[serde(default = "default_suspect_suffix")]
    pub(crate) suspect_suffix: String,
    #[serde(default, rename = "queue")]
    pub(crate) queues: Vec<QueueSpec>,
}

/// One work queue of a [`TopologySpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueSpec {
    pub(crate) name: String,
    /// Priority levels; unset: 10 on a classic queue, none on a quorum one.
    #[serde(default)]
    pub(crate) max_priority: Option<u8>,
    #[serde(default)]
    pub(crate) message_ttl_ms: Option<u64>,
    #[serde(default = "yes")]
    pub(crate) durable: bool,
    #[serde(default = "yes")]
    pub(crate) dead_letters: bool,
    /// Whether its workers run the poison guard.
    #[serde(default = "yes")]
    pub(crate) suspect_queue: bool,
    #[serde(default)]
    pub(crate) queue_type: QueueType,
    #[serde(default = "one")]
    pub(crate) shards: u16,
}

impl QueueSpec {
    /// A queue with the library's defaults.
    pub(crate) fn new(name: impl Into<String>) -> Self {
        QueueSpec {
            name: name.into(),
            max_priority: None,
            message_ttl_ms: None,
            durable: true,
            dead_letters: true,
            suspect_queue: true,
            queue_type: QueueType::Classic,
            shards: 1,
        }
    }

    /// The core config this spec stands for.
    pub(crate) fn config(&self) -> QueueConfig {
        let mut config = QueueConfig::new(&self.name)
            .durable(self.durable)
            .queue_type(self.queue_type)
            .shards(self.shards);
        if let Some(levels) = self.max_priority {
            config = config.max_priority(levels);
        }
        if let Some(ms) = self.message_ttl_ms {
            config = config.message_ttl(Duration::from_millis(ms));
        }
        config
    }
}

impl TopologySpec {
    /// The broker queues of the set's work queues, shards included.
    pub(crate) fn work_queues(&self) -> Vec<String> {
        self.queues
            .iter()
            .flat_map(|q| q.config().physical())
            .map(|config| config.name().to_owned())
            .collect()
    }

    /// Reads a TOML queue-set file.
    pub(crate) fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| OpsError::io(path, e))?;
        let spec: TopologySpec = toml::from_str(&text).map_err(|e| {
            OpsError::Invalid(format!("{}: not a queue-set file: {e}", path.display()))
        })?;
        spec.validate()
            .map_err(|e| OpsError::Invalid(format!("{}: {e}", path.display())))?;
        crate::check_suffixes(
            &spec.dead_suffix,
            &spec.deferred_suffix,
            &spec.suspect_suffix,
        )
        .map_err(|e| OpsError::Invalid(format!("{}: {e}", path.display())))?;
        Ok(spec)
    }

    /// Checks every queue's settings as the library would.
    pub(crate) fn validate(&self) -> std::result::Result<(), queuey_core::Error> {
        self.queues.iter().try_for_each(|q| q.config().validate())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_set_file_reads_as_its_example_says() {
        let spec: TopologySpec = toml::from_str(
            r#"
            dead_suffix = ".dead"          # the default
            [[queue]]
            name = "emails"                # priorities 0-10, durable, dead letters on
            [[queue]]
            name = "reports"
            max_priority = 0               # no priorities
            message_ttl_ms = 3600000
            [[queue]]
            name = "payments"
            queue_type = "quorum"          # replicated, no priorities
            shards = 4                     # the lane `payments` and payments.s0 … payments.s3
            "#,
        )
        .unwrap();
        assert_eq!(spec.queues.len(), 3);
    }

    #[test]
    fn a_queue_set_file_with_an_empty_suffix_is_refused() {
        let dir = std::env::temp_dir().join(format!("queuey-topology-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("queues.toml");
        std::fs::write(&path, "dead_suffix = \"\"\n[[queue]]\nname = \"emails\"\n").unwrap();
        let refused = TopologySpec::from_file(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(refused.contains("queues.toml"), "{refused}");
        assert!(refused.contains("dead"), "{refused}");
    }
}
