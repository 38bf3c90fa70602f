//! `queuey dead …`.
//!
//! Everything printed from a dead letter (ids, types, reasons, header names,
//! queue names) goes through [`escape`](crate::escape): a reason cannot
//! move the cursor, retitle the terminal or reorder the text around it.

use crate::out::{out, outln};
use std::path::PathBuf;

use crate::dead::{self, DeadQueues, Destination, Filter, Order, QueueCount, RedriveOptions};
use crate::escape::{json as esc_json, line as esc};
use crate::{OpsError, Result, time};
use clap::Subcommand;

mod redrive;

use super::table::{Table, clip};
use super::{Global, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum DeadCommand {
    /// List dead letters, a page at a time (oldest first unless --newest).
    ///
    /// Reads the queue only up to the page's last dead letter (newest first
    /// with a filter: the queue twice, to count the matching ones first).
    ///
    /// A sharded queue's dead letters are listed queue by queue, the lane's
    /// first and then each shard's, with a SHARD column; # is the position
    /// in that shard's dead-letter queue.
    Ls {
        /// The work queue (its dead-letter queue is read; a sharded queue's
        /// lane's and every shard's, a shard's name just that shard's).
        queue: String,
        #[command(flatten)]
        filter: Filter,
        /// Start from the newest dead letter.
        #[arg(long)]
        newest: bool,
        /// Dead letters per page.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Skip this many matching dead letters first.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Count dead letters by reason fingerprint and by job type.
    ///
    /// Reads the whole queue once, keeping counts only: the first 1000
    /// fingerprints and job types are listed, the letters of any further
    /// ones are counted apart. A sharded queue's lane and shards are counted
    /// together, with the count of each.
    Stats {
        /// The work queue (a sharded queue's name covers every shard).
        queue: String,
        #[command(flatten)]
        filter: Filter,
    },
    /// Show one dead letter: properties, headers, envelope, payload.
    ///
    /// Reads the queue up to the dead letter asked for (for #N: N letters).
    Show {
        /// The work queue (a sharded queue's name searches every shard).
        queue: String,
        /// Job id, message id, or #POSITION (1 = oldest; of a sharded
        /// queue, give the shard as QUEUE, e.g. `emails.s2`).
        id: String,
    },
    /// Move dead letters back to QUEUE (preview unless --yes).
    ///
    /// Only dead letters that died on QUEUE move, back to QUEUE. One whose
    /// x-original-queue names another queue is left in place (the preview
    /// and the summary count them) unless --to or --any-target says where
    /// it may go. The preview lists every target with its count and flags
    /// missing and foreign ones; it names the first 20 moves.
    ///
    /// For a sharded queue, each shard's dead letters go back to that
    /// shard (the lane's to the lane), never to another shard.
    ///
    /// Moves publish the jobs and remove the dead letters in broker
    /// transactions, so an interrupted redrive (Ctrl-C, kill, lost connection)
    /// is resumed by running it again: no job is lost or moved twice. A
    /// target queue that does not exist stops the redrive at its first dead
    /// letter, with nothing lost.
    Redrive {
        /// The work queue (a sharded queue's name covers every shard).
        queue: String,
        #[command(flatten)]
        filter: Filter,
        /// Move every dead letter to QUEUE instead, whatever queue it died on.
        #[arg(long, value_name = "QUEUE", conflicts_with = "any_target")]
        to: Option<String>,
        /// Move each dead letter to its own original queue (x-original-queue),
        /// also when that is another queue than QUEUE.
        #[arg(long)]
        any_target: bool,
        /// Move at most N.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// At most R moves per second.
        #[arg(long, value_name = "R")]
        rate: Option<f64>,
        /// Move only the first N, then stop, so you can watch them run.
        #[arg(long, value_name = "N")]
        canary: Option<usize>,
        /// Keep each job's attempt counter instead of resetting it to 1.
        #[arg(long)]
        keep_attempts: bool,
        /// Moves committed together (all or nothing); 1 with --rate.
        #[arg(long, value_name = "N", default_value_t = dead::DEFAULT_BATCH)]
        batch: usize,
        /// Act; without it the redrive only prints what it would move.
        #[arg(long)]
        yes: bool,
        /// No progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// Remove dead letters after exporting them to a JSON Lines file
    /// (preview unless --yes).
    Purge {
        /// The work queue (a sharded queue's name covers every shard, into
        /// one export file).
        queue: String,
        #[command(flatten)]
        filter: Filter,
        /// The export file to create (must not exist; created readable by
        /// you only, as it holds full payloads); written and flushed before
        /// anything is removed, deleted again if the export fails.
        #[arg(long, value_name = "FILE")]
        export: PathBuf,
        /// Act; without it the purge only prints what it would remove.
        #[arg(long)]
        yes: bool,
    },
    /// Publish the messages of an export file back (preview unless --yes).
    Import {
        /// A file written by `dead purge --export`.
        file: PathBuf,
        /// Import into this queue instead of the one each message came from.
        #[arg(long, value_name = "QUEUE")]
        to: Option<String>,
        /// Act; without it the import only prints what it would publish.
        #[arg(long)]
        yes: bool,
    },
}

pub(crate) async fn run(global: &Global, cmd: DeadCommand) -> Result<bool> {
    match cmd {
        DeadCommand::Ls {
            queue,
            filter,
            newest,
            limit,
            offset,
        } => {
            let order = if newest {
                Order::NewestFirst
            } else {
                Order::OldestFirst
            };
            let (queues, listing) = global
                .with_dead_queues("dead-ls", &queue, async |amqp, queues| {
                    queues.list(amqp, &filter, order, offset, limit).await
                })
                .await?;
            let dq = queues.first();
            if global.json {
                print_json(&serde_json::json!({
                    "queue": dq,
                    "sharded": queues.sharded,
                    "queues": listing.queues,
                    "total": listing.total,
                    "matching": listing.matching,
                    "matching_exact": listing.matching_exact,
                    "offset": offset,
                    "read": listing.read,
                    "items": listing.items,
                }));
                return Ok(false);
            }
            let mut table = Table::with_first(
                queues.sharded.then_some("SHARD"),
                ["#", "ID", "TYPE", "ATT", "DIED", "REASON"],
            );
            let now = crate::time::now_ms();
            for s in &listing.items {
                let shard = queues.sharded.then(|| queues.label(s.shard));
                table.row(shard.into_iter().chain([
                    s.position.to_string(),
                    s.id.clone(),
                    s.job_type.clone().unwrap_or_else(|| "-".into()),
                    s.attempts.map_or("-".into(), |n| n.to_string()),
                    s.died_at_ms.map_or("-".into(), |ms| time::when(ms, now)),
                    clip(&s.reason, 80),
                ]));
            }
            out!("{}", table.render());
            let at_least = if listing.matching_exact { "" } else { "≥ " };
            outln!(
                "{}: showing {} of {at_least}{} matching ({} dead letters{})",
                esc(&queues.describe()),
                listing.items.len(),
                listing.matching,
                listing.total,
                per_queue(&queues, &listing.queues)
            );
            if listing.more() {
                outln!("next page: --offset {}", offset + listing.items.len());
            }
            Ok(false)
        }
        DeadCommand::Stats { queue, filter } => {
            let (queues, stats) = global
                .with_dead_queues("dead-stats", &queue, async |amqp, queues| {
                    queues.read_stats(amqp, &filter).await
                })
                .await?;
            global.print(&stats, || {
            outln!(
                "{}: {} dead letters ({} malformed){}\n",
                esc(&queues.describe()),
                stats.total,
                stats.malformed,
                per_queue(&queues, &stats.queues)
            );
            let mut table = Table::new(["COUNT", "FINGERPRINT", "JOB TYPES", "EXAMPLE"]);
            for g in &stats.by_fingerprint {
                let mut types: Vec<String> = g
                    .job_types
                    .iter()
                    .map(|(t, n)| format!("{t}×{n}"))
                    .collect();
                if g.other_job_types > 0 {
                    types.push(format!("others×{}", g.other_job_types));
                }
                table.row(vec![
                    g.count.to_string(),
                    clip(&g.fingerprint, 60),
                    clip(&types.join(" "), 40),
                    g.example_id.clone(),
                ]);
            }
            out!("{}", table.render());
            if stats.other_fingerprints > 0 {
                outln!(
                    "… and {} dead letters with further fingerprints (only the first {} are grouped)",
                    stats.other_fingerprints,
                    dead::MAX_GROUPS
                );
            }
            outln!();
            let mut table = Table::new(["COUNT", "JOB TYPE"]);
            for t in &stats.by_job_type {
                table.row(vec![t.count.to_string(), t.job_type.clone()]);
            }
            out!("{}", table.render());
            if stats.other_job_types > 0 {
                outln!(
                    "… and {} dead letters of further job types (only the first {} are counted apart)",
                    stats.other_job_types,
                    dead::MAX_JOB_TYPES
                );
            }
            });
            Ok(false)
        }
        DeadCommand::Show { queue, id } => {
            let (queues, letter) = global
                .with_dead_queues("dead-show", &queue, async |amqp, queues| {
                    queues.find(amqp, &id, None).await
                })
                .await?;
            let detail = dead::show(&letter);
            global.print(&detail, || {
                let s = &detail.summary;
                let on = queues
                    .queues
                    .iter()
                    .find(|q| q.shard == s.shard)
                    .map_or(queues.first(), |q| q.dead_queue.as_str());
                let shard = if queues.sharded {
                    format!(", shard {}", queues.label(s.shard))
                } else {
                    String::new()
                };
                outln!(
                    "dead letter {} (#{} in {}{shard})",
                    esc(&s.id),
                    s.position,
                    esc(on)
                );
                outln!("reason:      {}", esc(&s.reason));
                outln!("fingerprint: {}", esc(&s.fingerprint));
                outln!("job type:    {}", esc(s.job_type.as_deref().unwrap_or("-")));
                outln!(
                    "died on:     {}",
                    esc(s.original_queue.as_deref().unwrap_or("- (unknown)"))
                );
                let now = time::now_ms();
                let at =
                    |ms: Option<i64>| ms.map_or("- (unknown)".into(), |ms| time::when(ms, now));
                outln!("died at:     {}", at(s.died_at_ms));
                if let Some(ms) = s.enqueued_at_ms.filter(|&ms| ms > 0) {
                    outln!("enqueued at: {}", at(i64::try_from(ms).ok()));
                }
                if let Some(error) = &detail.parse_error {
                    outln!("parse error: {}", esc(error));
                }
                let history = &detail.history;
                if !history.errors.is_empty() {
                    outln!("\nattempts:");
                    if history.cut > 0 {
                        outln!("  ({} earlier errors not kept)", history.cut);
                    }
                    for row in &history.errors {
                        let when = row.at_ms.map_or(String::new(), |ms| {
                            format!(" at {}", at(i64::try_from(ms).ok()))
                        });
                        let died = if row.last { ", died" } else { "" };
                        outln!("  #{}{when}{died}: {}", row.attempt, esc(&row.error));
                    }
                }
                outln!("\nproperties:");
                for (k, v) in &detail.properties {
                    outln!("  {}: {}", esc(k), esc_json(&v.to_string()));
                }
                outln!("\nheaders:");
                for (k, v) in &detail.headers {
                    outln!("  {}: {}", esc(k), esc_json(&v.to_string()));
                }
                match &detail.envelope {
                    Some(env) => {
                        outln!("\nenvelope:");
                        print_json(env);
                    }
                    None => outln!(
                        "\nthe body is not a queuey envelope ({})",
                        dead::MALFORMED_REASON
                    ),
                }
                outln!("\npayload:");
                print_json(&detail.payload);
            });
            Ok(false)
        }
        DeadCommand::Redrive {
            queue,
            filter,
            to,
            any_target,
            limit,
            rate,
            canary,
            keep_attempts,
            batch,
            yes,
            no_progress,
        } => {
            let home = crate::work_queue_of(&queue, &global.dead_suffix)?;
            if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                return Err(OpsError::Invalid(
                    "--rate must be a positive number of moves per second".into(),
                ));
            }
            let destination = match (to, any_target) {
                (Some(to), _) => Destination::Queue(to),
                (None, true) => Destination::Original,
                (None, false) => Destination::Home,
            };
            let options = RedriveOptions {
                destination,
                filter,
                limit: limit.into_iter().chain(canary).min(),
                rate,
                keep_attempts,
                batch,
                ..RedriveOptions::new(home)
            };
            let redrive = async |amqp: &_, queues: &_| {
                redrive::run(global, amqp, queues, &options, yes, canary, no_progress).await
            };
            let (_, code) = global
                .with_dead_queues("dead-redrive", &queue, redrive)
                .await?;
            Ok(code)
        }
        DeadCommand::Purge {
            queue,
            filter,
            export,
            yes,
        } => {
            let (queues, report) = global
                .with_dead_queues("dead-purge", &queue, async |amqp, queues| {
                    if !yes {
                        return preview_purge(global, amqp, queues, &filter, &export).await;
                    }
                    queues
                        .purge_with_export(amqp, &filter, &export)
                        .await
                        .map(Some)
                })
                .await?;
            if let Some(report) = report {
                global.print(&report, || {
                    outln!(
                        "exported {} dead letters to {} (flushed to disk), then removed them from {}{}; {} left in place",
                        report.purged,
                        esc(&report.file.display().to_string()),
                        esc(&queues.describe()),
                        per_queue(&queues, &report.queues),
                        report.kept
                    );
                });
            }
            Ok(false)
        }
        DeadCommand::Import { file, to, yes } => {
            let records = dead::read_export(&file)?;
            let plan = dead::plan_import(&records, to.as_deref());
            let file_name = file.display().to_string();
            if !yes {
                global.print(
                    &serde_json::json!({ "preview": true, "plan": plan }),
                    || {
                        outln!(
                            "preview: would publish {} messages from {}:",
                            plan.records,
                            esc(&file_name)
                        );
                        for (q, n) in &plan.by_queue {
                            outln!("  {n:>6}  → {}", esc(q));
                        }
                        outln!("nothing was changed; add --yes to import");
                    },
                );
                return Ok(false);
            }
            let n = global
                .with_amqp("dead-import", async |amqp| {
                    dead::import(amqp, &records, to.as_deref()).await
                })
                .await?;
            global.print(&serde_json::json!({ "imported": n, "plan": plan }), || {
                outln!("imported {n} messages from {}", esc(&file_name));
            });
            Ok(false)
        }
    }
}

/// `: lane 3, s0 4, s1 0` after a count over a sharded queue's dead-letter
/// queues; nothing for one queue.
fn per_queue(queues: &DeadQueues, counts: &[QueueCount]) -> String {
    if !queues.sharded {
        return String::new();
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|c| format!("{} {}", queues.label(c.shard), c.count))
        .collect();
    format!(": {}", parts.join(", "))
}

/// A preview over `queues` as JSON.
fn print_preview(queues: &DeadQueues, plan: &impl serde::Serialize) {
    print_json(&serde_json::json!({
        "preview": true,
        "queue": queues.first(),
        "sharded": queues.sharded,
        "plan": plan,
    }));
}

async fn preview_purge(
    global: &Global,
    amqp: &crate::Amqp,
    queues: &DeadQueues,
    filter: &Filter,
    export: &std::path::Path,
) -> Result<Option<dead::PurgeReport>> {
    let plan = queues.plan_purge(amqp, filter).await?;
    if global.json {
        print_preview(queues, &plan);
        return Ok(None);
    }
    outln!(
        "preview: would export {} of {} dead letters of {} to {} and then remove them",
        plan.matching,
        plan.read,
        esc(&queues.describe()),
        esc(&export.display().to_string())
    );
    for (id, reason) in &plan.samples {
        outln!("  {}  {}", esc(id), esc(&clip(reason, 70)));
    }
    if plan.matching > plan.samples.len() {
        outln!(
            "  … and {} more (the first {} are named)",
            plan.matching - plan.samples.len(),
            plan.samples.len()
        );
    }
    outln!("nothing was changed; add --yes to purge");
    Ok(None)
}
