//! `queuey dead redrive`: the preview, the progress bar and the summary.

use crate::Result;
use crate::dead::{self, DeadQueues, RedriveOptions};
use crate::escape::line as esc;
use crate::out::{errln, outln};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::Global;
use crate::cli::table::clip;

fn print_plan(dq: &str, plan: &dead::RedrivePlan, sharded: bool) {
    if plan.complete {
        outln!(
            "preview: would move {} of {} dead letters of {}:",
            plan.would_move,
            plan.read,
            esc(dq)
        );
    } else {
        outln!(
            "preview: would move {} of the first {} of {} dead letters of {} (stopped at the limit):",
            plan.would_move,
            plan.read,
            plan.total,
            esc(dq)
        );
    }
    for t in &plan.targets {
        let flag = match (t.moves, t.exists, t.foreign) {
            (false, _, _) => {
                "  left in place: another queue than the one redriven (--any-target or --to moves them)"
            }
            (true, false, _) => "  MISSING: the redrive stops at its first dead letter for it",
            (true, true, true) => "  another queue than the one redriven",
            (true, true, false) => "",
        };
        outln!("  {:>6}  → {}{flag}", t.letters, esc(&t.queue));
    }
    if plan.other_targets > 0 {
        outln!(
            "  {:>6}  → further queues (only {} are named)",
            plan.other_targets,
            dead::MAX_TARGETS
        );
    }
    if !plan.samples.is_empty() {
        outln!(
            "showing {} of {}{} moves:",
            plan.samples.len(),
            if plan.complete { "" } else { "≥ " },
            plan.would_move
        );
    }
    for m in &plan.samples {
        outln!(
            "  {}  {}  {}  → {}",
            esc(&m.id),
            esc(m.job_type.as_deref().unwrap_or("-")),
            esc(&clip(&m.reason, 60)),
            esc(&m.target)
        );
    }
    if plan.foreign > 0 {
        let own = if sharded {
            " or the shard whose dead-letter queue holds them"
        } else {
            ""
        };
        outln!(
            "{} dead letters stay: they died on another queue than {}{own} (their \
             x-original-queue); add --any-target to send each to its own queue, or --to QUEUE",
            plan.foreign,
            esc(&plan.queue)
        );
    }
    print_unmovable(&plan.left, "cannot move");
    outln!("nothing was changed; add --yes to move them");
}

/// The dead letters that cannot move, the first ones named after `verb`.
fn print_unmovable(left: &dead::Left, verb: &str) {
    for (id, why) in &left.unmovable_samples {
        outln!("  {verb} {}: {}", esc(id), esc(why));
    }
    if left.unmovable > left.unmovable_samples.len() {
        outln!(
            "  … and {} more that cannot move",
            left.unmovable - left.unmovable_samples.len()
        );
    }
}

pub(super) async fn run(
    global: &Global,
    amqp: &crate::Amqp,
    queues: &DeadQueues,
    options: &RedriveOptions,
    yes: bool,
    canary: Option<usize>,
    no_progress: bool,
) -> Result<bool> {
    let dq = &queues.describe();
    let plan = queues.plan_redrive(amqp, options).await?;
    if !yes {
        if global.json {
            super::print_preview(queues, &plan);
        } else {
            print_plan(dq, &plan, queues.sharded);
        }
        return Ok(false);
    }
    let bar = if no_progress || global.json {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(plan.would_move as u64);
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
        bar.set_message(esc(&m.id).into_owned());
    };
    let report = queues.redrive(amqp, options, &mut on_move).await;
    watcher.abort();
    bar.finish_and_clear();
    let report = report?;
    global.print(&report, || {
        outln!(
            "moved {} dead letters of {} (redrive id {})",
            report.moved,
            esc(dq),
            esc(&report.redrive_id)
        );
        for (target, n) in &report.moved_to {
            outln!("  {n:>6}  → {}", esc(target));
        }
        if report.foreign > 0 {
            outln!(
                "left {} dead letters in place: they died on another queue than {} (add \
                 --any-target to send each to its own queue, or --to QUEUE):",
                report.foreign,
                esc(&options.queue)
            );
            for (target, n) in &report.foreign_targets {
                outln!("  {n:>6}  of {}", esc(target));
            }
        }
        print_unmovable(&report.left, "left");
        if let Some(n) = canary {
            outln!(
                "canary: moved {} and stopped; watch them, then run again without --canary",
                report.moved.min(n)
            );
        }
    });
    if let Some(why) = &report.stopped {
        errln!("stopped early: {}", esc(why));
    }
    Ok(report.stopped.is_some())
}
