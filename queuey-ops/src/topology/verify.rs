//! `topology verify`: every difference between the broker and a queue set.

use queuey_core::QueueType;
use queuey_rabbitmq::HoldQueues;
use queuey_rabbitmq::topology::ArgumentValue;
use serde::Serialize;
use serde_json::Value;

use super::expected::{Expected, expected};
use super::limits::{BROKER_DEFAULT_LIMIT, broker_has_default_limit, plan_limit_policies};
use super::{QueueSpec, TopologySpec};
use crate::amqp::Amqp;
use crate::argument::show;
use crate::error::Result;
use crate::holds::{hold_kind, hold_pattern};
use crate::mgmt::{Management, QueueInfo};
use crate::shards::shard_name;

/// What kind of problem verify found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProblemKind {
    /// A queue of the set does not exist.
    Missing,
    /// A queue is not of the type the set declares (classic or quorum).
    WrongType,
    /// A queue is not durable although it should be (or the other way).
    WrongDurability,
    /// A queue's arguments differ from what the set declares.
    WrongArguments,
    /// A hold queue whose work queue does not exist: its jobs expire into nothing.
    OrphanHold,
    /// A consumer on a hold queue: it takes delayed jobs before they are due.
    HoldConsumer,
    /// A policy or operator policy overrides TTL, expiry, length or dead-lettering.
    PolicyOverride,
    /// A `q.retry` queue left from an older version.
    LeftoverRetryQueue,
    /// A dead-letter or schedule quorum queue on the broker's default
    /// delivery limit.
    DefaultDeliveryLimit,
    /// The control stream without a bound in bytes.
    UnboundedControlStream,
    /// A shard past the queue's shard count: no worker consumes it.
    ExtraShard,
}

/// One difference between the broker and the queue set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Problem {
    pub(crate) queue: String,
    pub(crate) kind: ProblemKind,
    /// What is wrong and what it does, in words.
    pub(crate) detail: String,
}

const FULL: &str = "jobs are dropped or dead-lettered when the queue is full";
const ROUTED: &str = "expired or rejected jobs are routed elsewhere";

/// Policy keys that change what a hold, work or dead-letter queue does.
const SENSITIVE_POLICY_KEYS: &[(&str, &str)] = &[
    (
        "message-ttl",
        "messages expire sooner (held jobs are released early)",
    ),
    (
        "expires",
        "the queue can be deleted sooner, with the jobs in it",
    ),
    ("max-length", FULL),
    ("max-length-bytes", FULL),
    (
        "overflow",
        "changes what happens to jobs when the queue is full",
    ),
    ("dead-letter-exchange", ROUTED),
    ("dead-letter-routing-key", ROUTED),
    ("queue-mode", "refused by RabbitMQ 4.3"),
];

fn problem(queue: &str, kind: ProblemKind, detail: String) -> Problem {
    Problem {
        queue: queue.to_owned(),
        kind,
        detail,
    }
}

/// Compares one existing queue with what is expected of it.
fn check_queue(info: &QueueInfo, want: &Expected, out: &mut Vec<Problem>) {
    let queue_type = info.queue_type.as_deref().unwrap_or("classic");
    let wanted_type = match want.arguments.get("x-queue-type") {
        Some(ArgumentValue::Text(t)) => t.as_str(),
        _ => "classic",
    };
    if queue_type != wanted_type {
        out.push(problem(
            &info.name,
            ProblemKind::WrongType,
            format!("is a {queue_type} queue; the queue set says {wanted_type}"),
        ));
    }
    if info.durable != want.durable {
        out.push(problem(
            &info.name,
            ProblemKind::WrongDurability,
            format!(
                "durable = {}, the queue set says {}",
                info.durable, want.durable
            ),
        ));
    }
    let mut diffs = Vec::new();
    for (key, value) in &want.arguments {
        let found = info.arguments.get(*key);
        if *key == "x-delivery-limit" && found.is_none() {
            // `limits` reports it, with the policy that fixes it.
            continue;
        }
        if !crate::argument::matches(key, value, found) {
            let shown = found.map_or("absent".to_owned(), Value::to_string);
            diffs.push(format!("{key}: expected {}, found {shown}", show(value)));
        }
    }
    for (key, value) in &info.arguments {
        if !want.arguments.contains_key(key.as_str()) {
            diffs.push(format!("{key}: not expected, found {value}"));
        }
    }
    if !diffs.is_empty() {
        out.push(problem(
            &info.name,
            ProblemKind::WrongArguments,
            diffs.join("; "),
        ));
    }
    check_policies(info, out);
}

fn check_policies(info: &QueueInfo, out: &mut Vec<Problem>) {
    let keys = info.policy_keys();
    let names: Vec<String> = info
        .policy
        .iter()
        .map(|p| format!("policy `{p}`"))
        .chain(
            info.operator_policy
                .iter()
                .map(|p| format!("operator policy `{p}`")),
        )
        .collect();
    for (key, effect) in SENSITIVE_POLICY_KEYS {
        if let Some(value) = keys.get(*key) {
            let by = if names.is_empty() {
                "a policy".to_owned()
            } else {
                names.join(" / ")
            };
            out.push(problem(
                &info.name,
                ProblemKind::PolicyOverride,
                format!("{by} sets {key} = {value}: {effect}"),
            ));
        }
    }
}

/// Checks the hold queues and leftover `.retry` queue of `work` (`q` or a
/// shard of it).
async fn check_holds(
    mgmt: &Management,
    amqp: Option<&Amqp>,
    spec: &TopologySpec,
    q: &QueueSpec,
    work: &str,
    out: &mut Vec<Problem>,
) -> Result<()> {
    let work_exists = mgmt.queue(work).await?.is_some();
    for info in mgmt
        .queues(Some(&hold_pattern(work, &spec.deferred_suffix, false)))
        .await?
    {
        let Some((family, ttl)) = hold_kind(&info.name, work, &spec.deferred_suffix) else {
            continue;
        };
        if !work_exists {
            let fate = match family {
                HoldQueues::Classic => "expire into nothing",
                _ => "wait in the hold until it is declared again",
            };
            out.push(problem(
                &info.name,
                ProblemKind::OrphanHold,
                format!(
                    "hold queue of `{work}`, which does not exist: its {} job(s) {fate}",
                    info.messages.unwrap_or(0)
                ),
            ));
        }
        if family == HoldQueues::Classic && q.queue_type == QueueType::Quorum {
            out.push(problem(
                &info.name,
                ProblemKind::WrongType,
                format!(
                    "classic hold queue of the quorum queue `{work}`: a classic hold loses the \
                     jobs it releases into a quorum queue whenever the broker restarts; \
                     run every process with quorum hold queues"
                ),
            ));
        }
        let want = Expected {
            name: info.name.clone(),
            durable: true,
            arguments: family.arguments(work, ttl),
        };
        check_queue(&info, &want, out);
        let consumers = match amqp {
            Some(amqp) => amqp
                .counts(&info.name)
                .await?
                .map(|c| u64::from(c.consumers)),
            None => info.consumers,
        };
        if let Some(n) = consumers.filter(|n| *n > 0) {
            out.push(problem(
                &info.name,
                ProblemKind::HoldConsumer,
                format!("{n} consumer(s): they take delayed jobs before they are due"),
            ));
        }
    }
    let retry = format!("{work}.retry");
    if let Some(info) = mgmt.queue(&retry).await? {
        out.push(problem(
            &retry,
            ProblemKind::LeftoverRetryQueue,
            format!(
                "left from an older queuey ({} messages); delete it once it is empty",
                info.messages.unwrap_or(0)
            ),
        ));
    }
    Ok(())
}

/// Compares the broker with `spec` (with `amqp`, hold consumers are exact).
pub(crate) async fn verify(
    mgmt: &Management,
    amqp: Option<&Amqp>,
    spec: &TopologySpec,
) -> Result<Vec<Problem>> {
    let mut out = Vec::new();
    let overview = mgmt.overview().await?;
    let version = overview["rabbitmq_version"].as_str().unwrap_or("?");
    if broker_has_default_limit(version) {
        for policy in plan_limit_policies(mgmt, &spec.work_queues(), &spec.dead_suffix).await? {
            out.push(problem(
                &policy.queue,
                ProblemKind::DefaultDeliveryLimit,
                format!(
                    "quorum queue with no delivery limit of its own: RabbitMQ {version} gives it \
                     {BROKER_DEFAULT_LIMIT}, and {}; {}",
                    policy.kind.risk(),
                    policy.advice()
                ),
            ));
        }
    }
    for want in expected(spec) {
        match mgmt.queue(&want.name).await? {
            Some(info) => check_queue(&info, &want, &mut out),
            None => out.push(problem(
                &want.name,
                ProblemKind::Missing,
                "does not exist (`queuey topology apply` declares it)".to_owned(),
            )),
        }
    }
    for q in &spec.queues {
        for config in q.config().physical() {
            check_holds(mgmt, amqp, spec, q, config.name(), &mut out).await?;
        }
        // The first shard past the count.
        let extra = shard_name(&q.name, if q.shards > 1 { q.shards } else { 0 });
        if let Some(info) = mgmt.queue(&extra).await? {
            let set = if q.shards > 1 {
                format!("gives `{}` {} shards", q.name, q.shards)
            } else {
                format!("does not shard `{}`", q.name)
            };
            out.push(problem(
                &extra,
                ProblemKind::ExtraShard,
                format!(
                    "a shard the queue set does not declare (it {set}): no worker of this set \
                     consumes its {} job(s); give the queue its shard count, or move the jobs \
                     and delete the shard once it is empty",
                    info.messages.unwrap_or(0)
                ),
            ));
        }
    }
    Ok(out)
}
