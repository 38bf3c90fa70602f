//! queuey's quorum queues on the broker's default delivery limit, and the
//! policy that gives them one.
//!
//! RabbitMQ 4.0 and later give a quorum queue without `x-delivery-limit`
//! and without a dead-letter target a limit of 20, dropping a message
//! returned more often. queuey declares its dead-letter and schedule
//! queues with [`SAFE_DELIVERY_LIMIT`], but an older queue cannot take the
//! argument in place; a `delivery-limit` policy can, touching no message.
//! At risk: a dead-letter queue (each read by the tools counts) and a
//! schedule queue (each change of leader counts). An older control stream
//! likewise gets its bound by a `max-length-bytes` policy.

use queuey_rabbitmq::topology::{
    CONTROL_MAX_BYTES, SAFE_DELIVERY_LIMIT, SCHEDULE_INFIX, SINGLE_ACTIVE_CONSUMER,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::argument;
use crate::error::Result;
use crate::holds::regex_escape;
use crate::mgmt::{Management, QueueInfo};

/// The policy key that sets a quorum queue's delivery limit.
pub(crate) const POLICY_KEY: &str = "delivery-limit";

/// The policy key that bounds a stream in bytes.
pub(crate) const STREAM_BOUND_KEY: &str = "max-length-bytes";

/// The limit RabbitMQ 4.0 and later give a quorum queue that has none.
pub(crate) const BROKER_DEFAULT_LIMIT: i64 = 20;

/// Which of queuey's queues lacks its limit or bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AtRisk {
    DeadLetterQueue,
    ScheduleQueue,
    UnboundedControlStream,
}

impl AtRisk {
    /// What the broker's default limit risks for this queue.
    pub(crate) fn risk(self) -> &'static str {
        match self {
            AtRisk::DeadLetterQueue => {
                "a dead letter read 20 times (each `queuey dead` read and each dashboard page \
                 counts) is dropped for good"
            }
            AtRisk::ScheduleQueue => {
                "the schedule's last tick is dropped after 20 changes of leader without a fresh \
                 state (leaders of older queuey versions never publish one)"
            }
            AtRisk::UnboundedControlStream => {
                "a flood of records grows it (and the broker's disk) until they are 30 days old"
            }
        }
    }

    /// The policy key and value that fix it.
    pub(crate) fn policy(self) -> (&'static str, i64) {
        match self {
            AtRisk::DeadLetterQueue | AtRisk::ScheduleQueue => (POLICY_KEY, SAFE_DELIVERY_LIMIT),
            AtRisk::UnboundedControlStream => (STREAM_BOUND_KEY, CONTROL_MAX_BYTES),
        }
    }
}

/// Whether `info` is a stream with no bound in bytes (argument or policy).
pub(crate) fn unbounded_stream(info: &QueueInfo) -> bool {
    info.queue_type.as_deref() == Some("stream")
        && !info.arguments.contains_key("x-max-length-bytes")
        && !info.policy_keys().contains_key(STREAM_BOUND_KEY)
}

/// Whether the broker of `version` gives quorum queues a default delivery
/// limit (4.0 and later).
pub(crate) fn broker_has_default_limit(version: &str) -> bool {
    version_numbers(version).0 >= 4
}

/// Major, minor and patch of `3.10.8`; a missing or unreadable part is 0.
pub(crate) fn version_numbers(version: &str) -> (u32, u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

/// Whether `info` is a quorum queue with no delivery limit and no
/// dead-letter target (argument or policy).
pub(crate) fn on_default_limit(info: &QueueInfo) -> bool {
    let keys = info.policy_keys();
    info.queue_type.as_deref() == Some("quorum")
        && !info.arguments.contains_key("x-delivery-limit")
        && !keys.contains_key(POLICY_KEY)
        && !info.arguments.contains_key("x-dead-letter-exchange")
        && !keys.contains_key("dead-letter-exchange")
}

/// Which of queuey's queues `info` is, if it is one on the default limit.
pub(crate) fn at_risk(info: &QueueInfo, dead_suffix: &str) -> Option<AtRisk> {
    if !on_default_limit(info) {
        return None;
    }
    let single_active = info.arguments.get(SINGLE_ACTIVE_CONSUMER) == Some(&Value::Bool(true));
    if single_active && info.name.contains(SCHEDULE_INFIX) {
        Some(AtRisk::ScheduleQueue)
    } else if !dead_suffix.is_empty() && info.name.ends_with(dead_suffix) {
        Some(AtRisk::DeadLetterQueue)
    } else {
        None
    }
}

/// The policy (`queuey.{key}.{queue}`, matching that queue alone) that
/// gives one queue its limit or bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LimitPolicy {
    pub(crate) queue: String,
    pub(crate) kind: AtRisk,
    pub(crate) name: String,
    pub(crate) pattern: String,
    /// The policy already applied: a queue takes one policy, so the key is
    /// left for the operator to add to it.
    pub(crate) existing_policy: Option<String>,
}

impl LimitPolicy {
    pub(crate) fn for_queue(info: &QueueInfo, kind: AtRisk) -> Self {
        LimitPolicy {
            queue: info.name.clone(),
            kind,
            name: format!("queuey.{}.{}", kind.policy().0, info.name),
            pattern: format!("^{}$", regex_escape(&info.name)),
            existing_policy: info.policy.clone(),
        }
    }

    /// The policy as the management API takes it.
    pub(crate) fn definition(&self) -> Value {
        let (key, value) = self.kind.policy();
        json!({
            "pattern": self.pattern,
            "apply-to": "queues",
            "priority": 0,
            "definition": { key: value },
        })
    }

    /// What to do about it, in words.
    pub(crate) fn advice(&self) -> String {
        let (key, value) = self.kind.policy();
        match &self.existing_policy {
            None => format!(
                "`queuey topology apply --yes` sets the policy `{}` ({key} = {value}); no \
                 message is touched",
                self.name
            ),
            Some(policy) => format!(
                "add {key} = {value} to the policy `{policy}`, which applies to it (a second \
                 policy would take its place)"
            ),
        }
    }
}

/// The queues of `candidates` on the broker's default limit, each with the
/// policy that fixes it.
pub(crate) fn limit_policies(candidates: &[QueueInfo], dead_suffix: &str) -> Vec<LimitPolicy> {
    candidates
        .iter()
        .filter_map(|info| {
            at_risk(info, dead_suffix).map(|kind| LimitPolicy::for_queue(info, kind))
        })
        .collect()
}

/// The dead-letter and schedule queues of `queues` on the default limit.
pub(crate) async fn plan_limit_policies(
    mgmt: &Management,
    queues: &[String],
    dead_suffix: &str,
) -> Result<Vec<LimitPolicy>> {
    let mut found = Vec::new();
    for queue in queues {
        let dead = queuey_rabbitmq::topology::dead_letter_queue_name(queue, dead_suffix);
        found.extend(mgmt.queue(&dead).await?);
        let schedules = format!("^{}", regex_escape(&format!("{queue}{SCHEDULE_INFIX}")));
        found.extend(mgmt.queues(Some(&schedules)).await?);
    }
    Ok(limit_policies(&found, dead_suffix))
}

/// The control streams (by their arguments, whatever their name) among
/// `candidates` without a bound in bytes, each with its policy.
pub(crate) fn control_stream_policies(candidates: &[QueueInfo]) -> Vec<LimitPolicy> {
    let mut shape = queuey_rabbitmq::topology::control_stream_arguments();
    shape.remove("x-max-length-bytes");
    candidates
        .iter()
        .filter(|info| {
            unbounded_stream(info)
                && shape
                    .iter()
                    .all(|(key, value)| argument::matches(key, value, info.arguments.get(*key)))
        })
        .map(|info| LimitPolicy::for_queue(info, AtRisk::UnboundedControlStream))
        .collect()
}

/// The policy that bounds the control stream `stream` in bytes, if it
/// exists without a bound.
pub(crate) async fn plan_control_stream_policy(
    mgmt: &Management,
    stream: &str,
) -> Result<Option<LimitPolicy>> {
    Ok(mgmt
        .queue(stream)
        .await?
        .filter(unbounded_stream)
        .map(|info| LimitPolicy::for_queue(&info, AtRisk::UnboundedControlStream)))
}

/// Sets each policy of `policies` that no other policy stands in the way
/// of; returns those set.
pub(crate) async fn apply_limit_policies(
    mgmt: &Management,
    policies: &[LimitPolicy],
) -> Result<Vec<LimitPolicy>> {
    let mut set = Vec::new();
    for policy in policies.iter().filter(|p| p.existing_policy.is_none()) {
        mgmt.put_policy(&policy.name, &policy.definition()).await?;
        set.push(policy.clone());
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, kind: &str, arguments: Value, policy: Option<Value>) -> QueueInfo {
        serde_json::from_value(json!({
            "name": name,
            "durable": true,
            "type": kind,
            "arguments": arguments,
            "policy": policy.as_ref().map(|_| "p"),
            "effective_policy_definition": policy.unwrap_or(json!({})),
        }))
        .expect("a queue")
    }

    #[test]
    fn only_quorum_queues_without_limit_or_target_are_on_the_default() {
        let dead = info("q.dead", "quorum", json!({"x-queue-type": "quorum"}), None);
        assert_eq!(at_risk(&dead, ".dead"), Some(AtRisk::DeadLetterQueue));
        let limited = info(
            "q.dead",
            "quorum",
            json!({"x-queue-type": "quorum", "x-delivery-limit": 1_000_000}),
            None,
        );
        assert_eq!(at_risk(&limited, ".dead"), None);
        let by_policy = info(
            "q.dead",
            "quorum",
            json!({"x-queue-type": "quorum"}),
            Some(json!({"delivery-limit": 1_000_000})),
        );
        assert_eq!(at_risk(&by_policy, ".dead"), None);
        let classic = info("q.dead", "classic", json!({}), None);
        assert_eq!(at_risk(&classic, ".dead"), None);
        let hold = info(
            "q.deferred.quorum.5000",
            "quorum",
            json!({"x-queue-type": "quorum", "x-dead-letter-exchange": ""}),
            None,
        );
        assert!(!on_default_limit(&hold));
        let schedule = info(
            "q.periodic.beat",
            "quorum",
            json!({"x-queue-type": "quorum", "x-single-active-consumer": true}),
            None,
        );
        assert_eq!(at_risk(&schedule, ".dead"), Some(AtRisk::ScheduleQueue));
        let stranger = info("other", "quorum", json!({}), None);
        assert!(on_default_limit(&stranger));
        assert_eq!(at_risk(&stranger, ".dead"), None);
    }

    #[test]
    fn the_policy_names_one_queue_and_stays_out_of_another_policys_way() {
        let dead = info("app.q+1.dead", "quorum", json!({}), None);
        let policy = LimitPolicy::for_queue(&dead, AtRisk::DeadLetterQueue);
        assert_eq!(policy.name, "queuey.delivery-limit.app.q+1.dead");
        assert_eq!(policy.pattern, r"^app\.q\+1\.dead$");
        assert_eq!(
            policy.definition()["definition"],
            json!({"delivery-limit": 1_000_000})
        );
        assert!(policy.advice().contains("topology apply --yes"));
        let taken = info(
            "q.dead",
            "quorum",
            json!({}),
            Some(json!({"max-length": 10})),
        );
        let policy = LimitPolicy::for_queue(&taken, AtRisk::DeadLetterQueue);
        assert_eq!(policy.existing_policy.as_deref(), Some("p"));
        assert!(
            policy.advice().contains("add delivery-limit"),
            "{}",
            policy.advice()
        );
    }

    #[test]
    fn a_stream_without_a_bound_in_bytes_gets_one() {
        let old = info(
            "queuey.control",
            "stream",
            json!({"x-queue-type": "stream", "x-max-age": "30D"}),
            None,
        );
        assert!(unbounded_stream(&old));
        let policy = LimitPolicy::for_queue(&old, AtRisk::UnboundedControlStream);
        assert_eq!(policy.name, "queuey.max-length-bytes.queuey.control");
        assert_eq!(
            policy.definition()["definition"],
            json!({"max-length-bytes": 100_000_000})
        );
        assert!(policy.advice().contains("max-length-bytes = 100000000"));
        let new = info(
            "queuey.control",
            "stream",
            json!({"x-queue-type": "stream", "x-max-length-bytes": 100_000_000}),
            None,
        );
        assert!(!unbounded_stream(&new));
        let by_policy = info(
            "queuey.control",
            "stream",
            json!({}),
            Some(json!({"max-length-bytes": 1_000})),
        );
        assert!(!unbounded_stream(&by_policy));
        assert!(!unbounded_stream(&info("q", "classic", json!({}), None)));

        let control = info(
            "billing.control",
            "stream",
            json!({"x-queue-type": "stream", "x-max-age": "30D",
                   "x-stream-max-segment-size-bytes": 1_000_000}),
            None,
        );
        let heartbeats = info(
            "billing.control.workers",
            "stream",
            json!({"x-queue-type": "stream", "x-max-age": "1h",
                   "x-stream-max-segment-size-bytes": 1_000_000}),
            None,
        );
        let found = control_stream_policies(&[control, heartbeats, new, old]);
        assert_eq!(
            found.iter().map(|p| p.queue.as_str()).collect::<Vec<_>>(),
            ["billing.control"],
            "control streams by their arguments, whatever their name"
        );
    }

    #[test]
    fn the_default_limit_exists_from_rabbitmq_4() {
        assert!(!broker_has_default_limit("3.10.8"));
        assert!(!broker_has_default_limit("3.13.7"));
        assert!(broker_has_default_limit("4.0.5"));
        assert!(broker_has_default_limit("4.3.6"));
        assert!(!broker_has_default_limit("?"));
    }
}
