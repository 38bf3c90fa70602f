//! `queuey dead …`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use queuey_ops::dead::{self, Filter, Order, RedriveOptions};
use queuey_ops::{OpsError, Result};

use super::table::{Table, clip};
use super::{EXIT_PROBLEM, Global, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum DeadCommand {
    /// List dead letters, a page at a time (oldest first unless --newest).
    Ls {
        /// The work queue (its dead-letter queue is read).
        queue: String,
        #[command(flatten)]
        filter: FilterArgs,
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
    Stats {
        /// The work queue.
        queue: String,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Show one dead letter: properties, headers, envelope, payload.
    Show {
        /// The work queue.
        queue: String,
        /// Job id, message id, or #POSITION (1 = oldest).
        id: String,
    },
    /// Move dead letters back to their original queue (preview unless --yes).
    ///
    /// Moves publish the jobs and remove the dead letters in broker
    /// transactions, so an interrupted redrive (Ctrl-C, kill, lost connection)
    /// is resumed by running it again: no job is lost or moved twice.
    Redrive {
        /// The work queue.
        queue: String,
        #[command(flatten)]
        filter: FilterArgs,
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
        /// The work queue.
        queue: String,
        #[command(flatten)]
        filter: FilterArgs,
        /// The export file to create (must not exist); written and flushed
        /// before anything is removed.
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

/// Which dead letters a command applies to; every given condition must hold.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct FilterArgs {
    /// Reason contains TEXT (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
    /// Job type is exactly TYPE.
    #[arg(long = "type", value_name = "TYPE")]
    job_type: Option<String>,
    /// Reason fingerprint is exactly FP (as `dead stats` prints it).
    #[arg(long, value_name = "FP")]
    fingerprint: Option<String>,
    /// Only this id (repeatable).
    #[arg(long = "id", value_name = "ID")]
    ids: Vec<String>,
}

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter {
            reason: self.filter.clone(),
            job_type: self.job_type.clone(),
            fingerprint: self.fingerprint.clone(),
            ids: self.ids.clone(),
        }
    }
}

pub(crate) async fn run(global: &Global, cmd: DeadCommand) -> Result<ExitCode> {
    match cmd {
        DeadCommand::Ls {
            queue,
            filter,
            newest,
            limit,
            offset,
        } => {
            let dq = global.dead_queue(&queue);
            let amqp = global.connect("dead-ls").await?;
            let letters = dead::read(&amqp, &dq, None).await;
            amqp.close().await;
            let letters = letters?;
            let order = if newest {
                Order::NewestFirst
            } else {
                Order::OldestFirst
            };
            let filter = filter.filter();
            let matching = letters.iter().filter(|l| filter.matches(l)).count();
            let page = dead::page(&letters, &filter, order, offset, limit);
            if global.json {
                print_json(&serde_json::json!({
                    "queue": dq, "total": letters.len(), "matching": matching, "offset": offset, "items": page,
                }));
                return Ok(ExitCode::SUCCESS);
            }
            let mut table = Table::new(["#", "ID", "TYPE", "ATT", "REASON"]);
            for s in &page {
                table.row(vec![
                    s.position.to_string(),
                    s.id.clone(),
                    s.job_type.clone().unwrap_or_else(|| "-".into()),
                    s.attempts.map_or("-".into(), |n| n.to_string()),
                    clip(&s.reason, 80),
                ]);
            }
            print!("{}", table.render());
            println!(
                "{dq}: showing {} of {matching} matching ({} dead letters)",
                page.len(),
                letters.len()
            );
            if offset + page.len() < matching {
                println!("next page: --offset {}", offset + page.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        DeadCommand::Stats { queue, filter } => {
            let dq = global.dead_queue(&queue);
            let amqp = global.connect("dead-stats").await?;
            let letters = dead::read(&amqp, &dq, None).await;
            amqp.close().await;
            let filter = filter.filter();
            let letters: Vec<_> = letters?.into_iter().filter(|l| filter.matches(l)).collect();
            let stats = dead::stats(&letters);
            if global.json {
                print_json(&stats);
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{dq}: {} dead letters ({} malformed)\n",
                stats.total, stats.malformed
            );
            let mut table = Table::new(["COUNT", "FINGERPRINT", "JOB TYPES", "EXAMPLE"]);
            for g in &stats.by_fingerprint {
                let types: Vec<String> = g
                    .job_types
                    .iter()
                    .map(|(t, n)| format!("{t}×{n}"))
                    .collect();
                table.row(vec![
                    g.count.to_string(),
                    clip(&g.fingerprint, 60),
                    clip(&types.join(" "), 40),
                    g.example_id.clone(),
                ]);
            }
            print!("{}", table.render());
            println!();
            let mut table = Table::new(["COUNT", "JOB TYPE"]);
            for t in &stats.by_job_type {
                table.row(vec![t.count.to_string(), t.job_type.clone()]);
            }
            print!("{}", table.render());
            Ok(ExitCode::SUCCESS)
        }
        DeadCommand::Show { queue, id } => {
            let dq = global.dead_queue(&queue);
            let amqp = global.connect("dead-show").await?;
            let letters = dead::read(&amqp, &dq, None).await;
            amqp.close().await;
            let letters = letters?;
            let detail = dead::show(dead::find(&letters, &dq, &id)?);
            if global.json {
                print_json(&detail);
                return Ok(ExitCode::SUCCESS);
            }
            let s = &detail.summary;
            println!("dead letter {} (#{} in {dq})", s.id, s.position);
            println!("reason:      {}", s.reason);
            println!("fingerprint: {}", s.fingerprint);
            println!("job type:    {}", s.job_type.as_deref().unwrap_or("-"));
            println!(
                "back to:     {}",
                s.original_queue.as_deref().unwrap_or("- (unknown)")
            );
            println!("\nproperties:");
            for (k, v) in &detail.properties {
                println!("  {k}: {v}");
            }
            println!("\nheaders:");
            for (k, v) in &detail.headers {
                println!("  {k}: {v}");
            }
            match &detail.envelope {
                Some(env) => {
                    println!("\nenvelope:");
                    print_json(env);
                }
                None => println!("\nthe body is not a queuey envelope ({MALFORMED})"),
            }
            println!("\npayload:");
            print_json(&detail.payload);
            Ok(ExitCode::SUCCESS)
        }
        DeadCommand::Redrive {
            queue,
            filter,
            limit,
            rate,
            canary,
            keep_attempts,
            batch,
            yes,
            no_progress,
        } => {
            let dq = global.dead_queue(&queue);
            if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                return Err(OpsError::Invalid(
                    "--rate must be a positive number of moves per second".into(),
                ));
            }
            let options = RedriveOptions {
                filter: filter.filter(),
                limit: match (limit, canary) {
                    (Some(l), Some(c)) => Some(l.min(c)),
                    (l, c) => l.or(c),
                },
                rate,
                keep_attempts,
                batch,
                ..RedriveOptions::default()
            };
            let amqp = global.connect("dead-redrive").await?;
            let outcome = redrive(global, &amqp, &dq, &options, yes, canary, no_progress).await;
            amqp.close().await;
            outcome
        }
        DeadCommand::Purge {
            queue,
            filter,
            export,
            yes,
        } => {
            let dq = global.dead_queue(&queue);
            let filter = filter.filter();
            let amqp = global.connect("dead-purge").await?;
            let outcome = if yes {
                dead::purge_with_export(&amqp, &dq, &filter, &export)
                    .await
                    .map(|report| {
                        if global.json {
                            print_json(&report);
                        } else {
                            println!(
                                "exported {} dead letters to {} (flushed to disk), then removed them from {dq}; {} left in place",
                                report.purged,
                                report.file.display(),
                                report.kept
                            );
                        }
                        ExitCode::SUCCESS
                    })
            } else {
                preview_purge(global, &amqp, &dq, &filter, &export).await
            };
            amqp.close().await;
            outcome
        }
        DeadCommand::Import { file, to, yes } => {
            let records = dead::read_export(&file)?;
            let plan = dead::plan_import(&records, to.as_deref());
            if !yes {
                if global.json {
                    print_json(&serde_json::json!({ "preview": true, "plan": plan }));
                } else {
                    println!(
                        "preview: would publish {} messages from {}:",
                        plan.records,
                        file.display()
                    );
                    for (q, n) in &plan.by_queue {
                        println!("  {n:>6}  → {q}");
                    }
                    println!("nothing was changed; add --yes to import");
                }
                return Ok(ExitCode::SUCCESS);
            }
            let amqp = global.connect("dead-import").await?;
            let outcome = dead::import(&amqp, &records, to.as_deref()).await;
            amqp.close().await;
            let n = outcome?;
            if global.json {
                print_json(&serde_json::json!({ "imported": n, "plan": plan }));
            } else {
                println!("imported {n} messages from {}", file.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

const MALFORMED: &str = dead::MALFORMED_REASON;

async fn preview_purge(
    global: &Global,
    amqp: &queuey_ops::Amqp,
    dq: &str,
    filter: &Filter,
    export: &std::path::Path,
) -> Result<ExitCode> {
    let letters = dead::read(amqp, dq, None).await?;
    let matching: Vec<_> = letters.iter().filter(|l| filter.matches(l)).collect();
    if global.json {
        let ids: Vec<String> = matching.iter().map(|l| l.id()).collect();
        print_json(&serde_json::json!({ "preview": true, "queue": dq, "would_purge": ids }));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "preview: would export {} of {} dead letters of {dq} to {} and then remove them",
        matching.len(),
        letters.len(),
        export.display()
    );
    for l in matching.iter().take(10) {
        println!("  {}  {}", l.id(), clip(&l.reason(), 70));
    }
    if matching.len() > 10 {
        println!("  … and {} more", matching.len() - 10);
    }
    println!("nothing was changed; add --yes to purge");
    Ok(ExitCode::SUCCESS)
}

async fn redrive(
    global: &Global,
    amqp: &queuey_ops::Amqp,
    dq: &str,
    options: &RedriveOptions,
    yes: bool,
    canary: Option<usize>,
    no_progress: bool,
) -> Result<ExitCode> {
    let plan = dead::plan_redrive(amqp, dq, options).await?;
    if !yes {
        if global.json {
            print_json(&serde_json::json!({ "preview": true, "queue": dq, "plan": plan }));
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "preview: would move {} of {} dead letters of {dq}:",
            plan.moves.len(),
            plan.read
        );
        for (target, n) in &plan.by_target {
            println!("  {n:>6}  → {target}");
        }
        for m in plan.moves.iter().take(10) {
            println!(
                "  {}  {}  {}",
                m.id,
                m.job_type.as_deref().unwrap_or("-"),
                clip(&m.reason, 60)
            );
        }
        if plan.moves.len() > 10 {
            println!("  … and {} more", plan.moves.len() - 10);
        }
        for (id, why) in &plan.unmovable {
            println!("  cannot move {id}: {why}");
        }
        println!("nothing was changed; add --yes to move them");
        return Ok(ExitCode::SUCCESS);
    }
    let bar = if no_progress || global.json {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(plan.moves.len() as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} redrive {bar:40} {pos}/{len} ({per_sec}, eta {eta}) {msg}",
        ) {
            bar.set_style(style);
        }
        bar
    };
    // Ctrl-C stops after the batch under way instead of rolling it back.
    let stop = options.stop.clone();
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let mut on_move = |m: &dead::Moved| {
        bar.inc(1);
        bar.set_message(m.id.clone());
    };
    let report = dead::redrive(amqp, dq, options, &mut on_move).await;
    watcher.abort();
    bar.finish_and_clear();
    let report = report?;
    if global.json {
        print_json(&report);
    } else {
        println!(
            "moved {} dead letters of {dq} back (redrive id {})",
            report.moved.len(),
            report.redrive_id
        );
        for (id, why) in &report.unmovable {
            println!("  left {id}: {why}");
        }
        if let Some(n) = canary {
            println!(
                "canary: moved {} and stopped; watch them, then run again without --canary",
                report.moved.len().min(n)
            );
        }
    }
    if let Some(why) = &report.stopped {
        eprintln!("stopped early: {why}");
        return Ok(ExitCode::from(EXIT_PROBLEM));
    }
    Ok(ExitCode::SUCCESS)
}
