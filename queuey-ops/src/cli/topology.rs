//! `queuey topology verify|apply`.

use crate::out::{out, outln};
use std::path::PathBuf;

use crate::topology::{self, QueueSpec, TopologySpec};
use crate::{OpsError, Result, escape};
use clap::{Args, Subcommand};

use super::table::Table;
use super::{Global, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum TopologyCommand {
    /// Compare the broker with a queue set; exit 3 on any problem.
    ///
    /// Checks that each queue exists, has the declared type and durability, and has the
    /// arguments queuey declares; finds orphan hold queues, consumers on
    /// hold queues, policies or operator policies overriding TTL, expiry,
    /// length or dead-lettering, and leftover `.retry` queues. A sharded
    /// queue (--shards, `shards =` in the file) is checked shard by shard,
    /// and a shard past its count is reported.
    Verify(QueueSet),
    /// Declare the queues of a queue set that are missing (preview unless --yes).
    ///
    /// Existing queues are never declared again. A dead-letter or schedule
    /// queue of the set created without a delivery limit (RabbitMQ 4 gives
    /// it 20 and drops a message past it) gets a `delivery-limit` policy of
    /// its own instead, which changes no message; one that another policy
    /// already applies to is left for you to add the key to that policy.
    Apply {
        #[command(flatten)]
        set: QueueSet,
        /// Act; without it apply only prints what it would declare.
        #[arg(long)]
        yes: bool,
    },
}

/// The queue set: a TOML file, queue names with the settings they share, or both.
#[derive(Debug, Args)]
pub(crate) struct QueueSet {
    /// A queue-set file (TOML: `[[queue]] name = "emails"`, see the README).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A work queue of the set (repeatable); the settings below apply to these.
    #[arg(long = "queue", value_name = "QUEUE")]
    queues: Vec<String>,
    /// Priority levels of the --queue queues (0: none; default 10, or none with --quorum).
    #[arg(long, value_name = "N")]
    max_priority: Option<u8>,
    /// The --queue queues are quorum queues (replicated; no priority levels).
    #[arg(long)]
    quorum: bool,
    /// x-message-ttl of the --queue queues.
    #[arg(long, value_name = "MS")]
    message_ttl_ms: Option<u64>,
    /// The --queue queues are not durable.
    #[arg(long)]
    not_durable: bool,
    /// The --queue queues have no dead-letter queue.
    #[arg(long)]
    no_dead_letters: bool,
    /// The --queue queues have no suspect queue (their workers run with the
    /// poison guard off).
    #[arg(long)]
    no_suspect_queue: bool,
    /// The --queue queues are sharded over N broker queues (`QueueConfig::shards`):
    /// their lane and NAME.s0 … NAME.s{N-1}, each with its own dead-letter
    /// and suspect queues, are checked or declared [default: 1, not sharded]
    #[arg(long, value_name = "N", default_value_t = 1, hide_default_value = true)]
    shards: u16,
}

impl QueueSet {
    fn spec(&self, global: &Global) -> Result<TopologySpec> {
        let mut spec = match &self.config {
            Some(path) => TopologySpec::from_file(path)?,
            None => TopologySpec {
                dead_suffix: global.dead_suffix.clone(),
                deferred_suffix: global.deferred_suffix.clone(),
                suspect_suffix: global.suspect_suffix.clone(),
                queues: Vec::new(),
            },
        };
        let max_priority = match (self.max_priority, self.quorum) {
            (Some(levels @ 1..), true) => {
                return Err(OpsError::Invalid(format!(
                    "--max-priority {levels} with --quorum: a quorum queue has no priority levels; \
                     drop --max-priority"
                )));
            }
            (levels, _) => levels,
        };
        let queue_type = if self.quorum {
            queuey_core::QueueType::Quorum
        } else {
            queuey_core::QueueType::Classic
        };
        for name in &self.queues {
            spec.queues.push(QueueSpec {
                name: name.clone(),
                max_priority,
                queue_type,
                message_ttl_ms: self.message_ttl_ms,
                durable: !self.not_durable,
                dead_letters: !self.no_dead_letters,
                suspect_queue: !self.no_suspect_queue,
                shards: self.shards,
            });
        }
        spec.validate()
            .map_err(|e| OpsError::Invalid(e.to_string()))?;
        if spec.queues.is_empty() {
            return Err(OpsError::Invalid(
                "no queues to check: give --queue NAME (repeatable) or --config FILE".into(),
            ));
        }
        Ok(spec)
    }
}

/// ` (emails over 4 shards)` when queues of the set are sharded.
fn sharded_note(spec: &TopologySpec) -> String {
    let sharded: Vec<String> = spec
        .queues
        .iter()
        .filter(|q| q.shards > 1)
        .map(|q| format!("{} over {} shards", escape::line(&q.name), q.shards))
        .collect();
    if sharded.is_empty() {
        String::new()
    } else {
        format!(" ({}, lane and shards checked)", sharded.join(", "))
    }
}

pub(crate) async fn run(global: &Global, cmd: TopologyCommand) -> Result<bool> {
    let mgmt = global.management()?;
    match cmd {
        TopologyCommand::Verify(set) => {
            let spec = set.spec(global)?;
            let verify = async |amqp: &_| topology::verify(&mgmt, Some(amqp), &spec).await;
            let mut problems = global.with_amqp("topology-verify", verify).await?;
            if let Some(policy) =
                topology::plan_control_stream_policy(&mgmt, &global.control_stream).await?
            {
                problems.push(topology::Problem {
                    queue: policy.queue.clone(),
                    kind: topology::ProblemKind::UnboundedControlStream,
                    detail: format!(
                        "the control stream has no bound in bytes: {}; {}",
                        policy.kind.risk(),
                        policy.advice()
                    ),
                });
            }
            if global.json {
                print_json(&problems);
            } else if problems.is_empty() {
                outln!(
                    "topology ok: {} queue(s) match{}",
                    spec.queues.len(),
                    sharded_note(&spec)
                );
            } else {
                let mut table = Table::new(["QUEUE", "PROBLEM", "DETAIL"]);
                for p in &problems {
                    let kind = serde_json::to_value(p.kind).unwrap_or_default();
                    let kind = kind.as_str().unwrap_or_default().to_owned();
                    table.row([p.queue.clone(), kind, p.detail.clone()]);
                }
                out!("{}", table.render());
                outln!("{} problem(s)", problems.len());
            }
            Ok(!problems.is_empty())
        }
        TopologyCommand::Apply { set, yes } => {
            let spec = set.spec(global)?;
            let plan = topology::plan_apply(&mgmt, &spec).await?;
            let mut limits =
                topology::plan_limit_policies(&mgmt, &spec.work_queues(), &spec.dead_suffix)
                    .await?;
            limits
                .extend(topology::plan_control_stream_policy(&mgmt, &global.control_stream).await?);
            if !yes {
                global.print(
                    &serde_json::json!({
                        "preview": true,
                        "declare": plan,
                        "policies": limits,
                    }),
                    || {
                        outln!("preview: would declare {} queue(s):", plan.len());
                        for d in &plan {
                            let arguments = format!("{:?}", d.arguments);
                            outln!(
                                "  {} durable={} {}",
                                escape::line(&d.name),
                                d.durable,
                                escape::line(&arguments)
                            );
                        }
                        print_limits(&limits);
                        outln!("nothing was changed; add --yes to declare them");
                    },
                );
                return Ok(false);
            }
            let apply = async |amqp: &_| topology::apply(amqp, &plan).await;
            global.with_amqp("topology-apply", apply).await?;
            let set = topology::apply_limit_policies(&mgmt, &limits).await?;
            let left: Vec<_> = limits
                .iter()
                .filter(|p| p.existing_policy.is_some())
                .collect();
            global.print(
                &serde_json::json!({
                    "declared": plan,
                    "policies": set,
                    "left_to_you": left,
                }),
                || {
                    outln!("declared {} queue(s)", plan.len());
                    for d in &plan {
                        outln!("  {}", escape::line(&d.name));
                    }
                    if !set.is_empty() {
                        outln!("set {} polic(ies)", set.len());
                        for p in &set {
                            let (key, value) = p.kind.policy();
                            outln!(
                                "  {} on {} ({key} = {value})",
                                escape::line(&p.name),
                                escape::line(&p.queue)
                            );
                        }
                    }
                    for p in &left {
                        outln!(
                            "left to you: {}: {}",
                            escape::line(&p.queue),
                            escape::line(&p.advice())
                        );
                    }
                },
            );
            Ok(false)
        }
    }
}

/// The preview of the delivery-limit policies `apply` would set.
fn print_limits(limits: &[topology::LimitPolicy]) {
    if limits.is_empty() {
        return;
    }
    outln!(
        "would give {} queue(s) a policy (a delivery limit, or the control stream's bound in \
         bytes):",
        limits.len()
    );
    for p in limits {
        outln!(
            "  {}: {}; {}",
            escape::line(&p.queue),
            p.kind.risk(),
            escape::line(&p.advice())
        );
    }
}
