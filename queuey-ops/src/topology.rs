//! `topology verify` and `topology apply`: the broker against a queue set.
//!
//! A queue set is what the application declares: queue names with the
//! settings that shape their arguments (priorities, TTL, durability, dead
//! letters) and the suffixes. [`TopologySpec`] reads it from a small TOML
//! file or is built on the command line; the expected arguments come from
//! `queuey_rabbitmq::topology`, the same functions the backend declares with.

use std::collections::BTreeMap;
use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use queuey_core::QueueConfig;
use queuey_core::QueueType;
use queuey_rabbitmq::HoldQueues;
use queuey_rabbitmq::topology::{self as names, ArgumentValue, QueueArguments};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::amqp::{Amqp, short};
use crate::error::{OpsError, Result};
use crate::holds::{hold_kind, hold_pattern};
use crate::mgmt::{Management, QueueInfo};

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

/// The queue set an application declares.
///
/// ```
/// let spec: queuey_ops::topology::TopologySpec = toml::from_str(r#"
///     dead_suffix = ".dead"          # the default
///     [[queue]]
///     name = "emails"                # priorities 0-10, durable, dead letters on
///     [[queue]]
///     name = "reports"
///     max_priority = 0               # no priorities
///     message_ttl_ms = 3600000
///     [[queue]]
///     name = "payments"
///     queue_type = "quorum"          # replicated, no priorities
/// "#)?;
/// assert_eq!(spec.queues.len(), 3);
/// # Ok::<(), toml::de::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Suffix of dead-letter queues.
    #[serde(default = "default_dead_suffix")]
    pub dead_suffix: String,
    /// Suffix of hold queues, before `.{ttl_ms}`.
    #[serde(default = "default_deferred_suffix")]
    pub deferred_suffix: String,
    /// Suffix of the poison guard's suspect queues.
    #[serde(default = "default_suspect_suffix")]
    pub suspect_suffix: String,
    /// The work queues.
    #[serde(default, rename = "queue")]
    pub queues: Vec<QueueSpec>,
}

/// One work queue of a [`TopologySpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// The work queue's name.
    pub name: String,
    /// Priority levels (`x-max-priority`); 0 for none. Unset: 10 on a
    /// classic queue, none on a quorum queue.
    #[serde(default)]
    pub max_priority: Option<u8>,
    /// The queue's `x-message-ttl`, if it has one.
    #[serde(default)]
    pub message_ttl_ms: Option<u64>,
    /// Whether the queue is durable (default true).
    #[serde(default = "yes")]
    pub durable: bool,
    /// Whether it has a dead-letter queue (default true).
    #[serde(default = "yes")]
    pub dead_letters: bool,
    /// Whether it has a suspect queue, i.e. whether its workers run the
    /// poison guard (default true).
    #[serde(default = "yes")]
    pub suspect_queue: bool,
    /// `classic` (the default) or `quorum`; a quorum queue has no priority
    /// levels.
    #[serde(default)]
    pub queue_type: QueueType,
}

impl QueueSpec {
    /// A queue with the library's defaults.
    pub fn new(name: impl Into<String>) -> Self {
        QueueSpec {
            name: name.into(),
            max_priority: None,
            message_ttl_ms: None,
            durable: true,
            dead_letters: true,
            suspect_queue: true,
            queue_type: QueueType::Classic,
        }
    }

    /// The core config this spec stands for.
    pub fn config(&self) -> QueueConfig {
        let mut config = QueueConfig::new(&self.name)
            .durable(self.durable)
            .queue_type(self.queue_type);
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
    /// Reads a TOML queue-set file.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
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

    /// Checks every queue's settings as the library would before declaring
    /// them (a quorum queue with priority levels, for one).
    pub fn validate(&self) -> std::result::Result<(), queuey_core::Error> {
        self.queues.iter().try_for_each(|q| q.config().validate())
    }
}

/// What kind of problem verify found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A queue of the set does not exist.
    Missing,
    /// A queue is not a classic queue.
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
}

/// One difference between the broker and the queue set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The queue concerned.
    pub queue: String,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// What is wrong and what it does, in words.
    pub detail: String,
}

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
    (
        "max-length",
        "jobs are dropped or dead-lettered when the queue is full",
    ),
    (
        "max-length-bytes",
        "jobs are dropped or dead-lettered when the queue is full",
    ),
    (
        "overflow",
        "changes what happens to jobs when the queue is full",
    ),
    (
        "dead-letter-exchange",
        "expired or rejected jobs are routed elsewhere",
    ),
    (
        "dead-letter-routing-key",
        "expired or rejected jobs are routed elsewhere",
    ),
    ("queue-mode", "refused by RabbitMQ 4.3"),
];

/// What a queue of the set must look like.
#[derive(Debug, Clone)]
struct Expected {
    name: String,
    durable: bool,
    arguments: QueueArguments,
}

/// The queues `spec` declares (work, dead-letter and suspect queues; hold
/// queues are created on demand and checked by [`verify`] as they are
/// found).
fn expected(spec: &TopologySpec) -> Vec<Expected> {
    let mut out = Vec::new();
    for q in &spec.queues {
        let config = q.config();
        let dead = q
            .dead_letters
            .then(|| names::dead_letter_queue_name(&q.name, &spec.dead_suffix));
        out.push(Expected {
            name: q.name.clone(),
            durable: q.durable,
            arguments: names::work_queue_arguments(&config, dead.as_deref()),
        });
        if q.suspect_queue {
            out.push(Expected {
                name: names::suspect_queue_name(&q.name, &spec.suspect_suffix),
                durable: q.durable,
                arguments: names::suspect_queue_arguments(&config, dead.as_deref()),
            });
        }
        if let Some(dead) = dead {
            out.push(Expected {
                name: dead,
                durable: q.durable,
                arguments: names::dead_letter_queue_arguments(&config),
            });
        }
    }
    out
}

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
        let same = match (value, found) {
            (ArgumentValue::Integer(n), Some(v)) => v.as_i64() == Some(*n),
            (ArgumentValue::Text(t), Some(Value::String(s))) => t == s,
            // Absent and `classic` are the same to the broker.
            (ArgumentValue::Text(t), None) => *key == "x-queue-type" && t == "classic",
            _ => false,
        };
        if !same {
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

fn show(value: &ArgumentValue) -> String {
    match value {
        ArgumentValue::Integer(n) => n.to_string(),
        ArgumentValue::Text(t) => format!("{t:?}"),
        other => format!("{other:?}"),
    }
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

/// Compares the broker with `spec`. With `amqp`, consumer counts on hold
/// queues are exact (a passive declare) instead of the API's statistics.
pub async fn verify(
    mgmt: &Management,
    amqp: Option<&Amqp>,
    spec: &TopologySpec,
) -> Result<Vec<Problem>> {
    let mut out = Vec::new();
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
        let work_exists = mgmt.queue(&q.name).await?.is_some();
        for info in mgmt
            .queues(Some(&hold_pattern(&q.name, &spec.deferred_suffix)))
            .await?
        {
            let Some((family, ttl)) = hold_kind(&info.name, &q.name, &spec.deferred_suffix) else {
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
                        "hold queue of `{}`, which does not exist: its {} job(s) {fate}",
                        q.name,
                        info.messages.unwrap_or(0)
                    ),
                ));
            }
            if family == HoldQueues::Classic && q.queue_type == QueueType::Quorum {
                out.push(problem(
                    &info.name,
                    ProblemKind::WrongType,
                    format!(
                        "classic hold queue of the quorum queue `{}`: a classic hold loses the \
                         jobs it releases into a quorum queue whenever the broker restarts; \
                         run every process with quorum hold queues",
                        q.name
                    ),
                ));
            }
            let want = Expected {
                name: info.name.clone(),
                durable: true,
                arguments: family.arguments(&q.name, ttl),
            };
            check_queue(&info, &want, &mut out);
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
        let retry = format!("{}.retry", q.name);
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
    }
    Ok(out)
}

/// A queue `apply` would declare.
#[derive(Debug, Clone, Serialize)]
pub struct Declaration {
    /// The queue.
    pub name: String,
    /// Durable or not.
    pub durable: bool,
    /// Its arguments, as text.
    pub arguments: BTreeMap<String, String>,
    #[serde(skip)]
    raw: QueueArguments,
}

/// The queues of `spec` missing on the broker. Existing queues are never
/// changed (RabbitMQ cannot change a queue's arguments anyway).
pub async fn plan_apply(mgmt: &Management, spec: &TopologySpec) -> Result<Vec<Declaration>> {
    let mut out = Vec::new();
    for want in expected(spec) {
        if mgmt.queue(&want.name).await?.is_none() {
            out.push(Declaration {
                name: want.name.clone(),
                durable: want.durable,
                arguments: want
                    .arguments
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), show(v)))
                    .collect(),
                raw: want.arguments,
            });
        }
    }
    Ok(out)
}

/// Declares `declarations`, each on its own channel.
pub async fn apply(amqp: &Amqp, declarations: &[Declaration]) -> Result<()> {
    for d in declarations {
        let channel = amqp.channel().await?;
        let options = QueueDeclareOptions {
            durable: d.durable,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(short(&d.name)?, options, field_table(&d.raw))
            .await
            .map_err(|e| OpsError::amqp(format!("declaring `{}`", d.name), e))?;
        let _ = channel.close(200, ShortString::default()).await;
    }
    Ok(())
}

/// Queue arguments as an AMQP table: integers as 32-bit when they fit,
/// strings as long strings.
pub fn field_table(args: &QueueArguments) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in args {
        let value = match value {
            ArgumentValue::Integer(n) => match i32::try_from(*n) {
                Ok(small) => AMQPValue::LongInt(small),
                Err(_) => AMQPValue::LongLongInt(*n),
            },
            ArgumentValue::Text(t) => AMQPValue::LongString(LongString::from(t.as_str())),
            other => AMQPValue::LongString(LongString::from(format!("{other:?}"))),
        };
        table.insert(ShortString::from(*key), value);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_set_includes_each_suspect_queue_unless_it_is_off() {
        let spec: TopologySpec = toml::from_str(
            r#"
            [[queue]]
            name = "emails"
            max_priority = 3
            [[queue]]
            name = "reports"
            suspect_queue = false
            [[queue]]
            name = "payments"
            queue_type = "quorum"
            "#,
        )
        .expect("a queue set");
        assert_eq!(spec.suspect_suffix, ".suspect");
        let names: Vec<String> = expected(&spec).into_iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "emails",
                "emails.suspect",
                "emails.dead",
                "reports",
                "reports.dead",
                "payments",
                "payments.suspect",
                "payments.dead",
            ]
        );
        let suspect = expected(&spec)
            .into_iter()
            .find(|e| e.name == "emails.suspect")
            .expect("the suspect queue");
        assert!(suspect.durable);
        assert!(!suspect.arguments.contains_key("x-max-priority"));
        assert_eq!(
            suspect.arguments,
            names::suspect_queue_arguments(&spec.queues[0].config(), Some("emails.dead"))
        );
        // A quorum queue's suspect queue is quorum too and dead-letters into
        // the dead-letter queue past the same delivery limit.
        let suspect = expected(&spec)
            .into_iter()
            .find(|e| e.name == "payments.suspect")
            .expect("the quorum suspect queue");
        let text = |s: &str| ArgumentValue::Text(s.to_owned());
        assert_eq!(suspect.arguments.get("x-queue-type"), Some(&text("quorum")));
        assert_eq!(
            suspect.arguments.get("x-dead-letter-routing-key"),
            Some(&text("payments.dead"))
        );
        assert_eq!(
            suspect.arguments.get("x-delivery-limit"),
            Some(&ArgumentValue::Integer(names::QUORUM_DELIVERY_LIMIT))
        );
    }
}
