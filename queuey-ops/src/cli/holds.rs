//! `queuey holds` and `queuey holds prune`.

use crate::Result;
use crate::holds::{self, Census, Stall};
use crate::mgmt::Management;
use crate::out::{errln, out, outln};
use crate::prune;
use crate::shards::{self, Shards};
use crate::time::{format_duration_ms, format_ms, now_ms};
use clap::{Args, Subcommand};
use queuey_rabbitmq::HoldPruned;

use super::table::Table;
use super::{Global, print_json};

#[derive(Debug, Args)]
pub(crate) struct HoldsArgs {
    #[command(subcommand)]
    action: Option<HoldsAction>,
    /// Work queues whose hold queues to count (a sharded queue's name
    /// covers the holds of its lane and every shard).
    #[arg(required = true, value_name = "QUEUE")]
    queues: Vec<String>,
    /// Print Prometheus text exposition (gauges `queuey_hold_jobs`,
    /// `queuey_hold_consumers` and, for quorum holds,
    /// `queuey_hold_releasing`) instead of a table, without waiting for the
    /// second read that tells a stalled quorum hold (alert on a
    /// `queuey_hold_releasing` that stays above 0 instead).
    #[arg(long)]
    prometheus: bool,
    /// Read at most N jobs of each hold queue for the release times (0: none).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    peek: usize,
}

#[derive(Debug, Subcommand)]
enum HoldsAction {
    /// Delete the empty quorum hold queues of work queues (a preview
    /// without --yes). Each is watched for ten seconds first and kept if a
    /// job reaches it; those with jobs, jobs not yet moved back, or
    /// consumers are kept.
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
struct PruneArgs {
    /// Work queues whose hold queues to prune (a sharded queue's name
    /// covers the holds of its lane and every shard).
    #[arg(required = true, value_name = "QUEUE")]
    queues: Vec<String>,
    /// Act; without it the command only prints what it would do.
    #[arg(long)]
    yes: bool,
}

pub(crate) async fn run(global: &Global, args: HoldsArgs) -> Result<bool> {
    if let Some(HoldsAction::Prune(prune)) = args.action {
        return run_prune(global, prune).await;
    }
    let mgmt = global.management()?;
    let mut censuses = censuses(global, &mgmt, "holds", &args.queues, args.peek).await?;
    let stalls = if args.prometheus {
        Vec::new()
    } else {
        mark_stalls(&mgmt, &mut censuses).await?
    };
    let state = global
        .with_fleet("holds", async |f| f.state().await)
        .await?;
    let consumers: u64 = censuses
        .iter()
        .flat_map(|c| &c.holds)
        .map(|h| h.consumers)
        .sum();
    if args.prometheus {
        out!("{}", holds::prometheus(&censuses));
    } else if global.json {
        print_json(&censuses);
    } else {
        for census in &censuses {
            print_census(census);
            if let Some((_, at)) = state.paused().find(|(q, _)| *q == census.queue) {
                let at = i64::try_from(at).unwrap_or(i64::MAX);
                outln!(
                    "paused since {} ({} ago): no worker takes its jobs, and jobs released from \
                     its holds wait in the queue until `queuey queue resume {}`",
                    format_ms(at),
                    format_duration_ms(now_ms() - at),
                    crate::escape::line(&census.queue)
                );
            }
        }
    }
    for stall in &stalls {
        errln!("problem: {}", crate::escape::line(&stall.describe()));
    }
    if consumers > 0 {
        errln!(
            "problem: {consumers} consumer(s) on hold queues; a consumer takes delayed jobs before \
             they are due. Find and stop it (the management UI lists a queue's consumers)."
        );
    }
    Ok(consumers > 0 || !stalls.is_empty())
}

/// The census of each of `queues`' holds, a sharded queue's with those of
/// its lane and every shard, reading at most `peek` jobs of each hold (see
/// [`holds::census_of`]).
async fn censuses(
    global: &Global,
    mgmt: &Management,
    what: &str,
    queues: &[String],
    peek: usize,
) -> Result<Vec<Census>> {
    global
        .with_amqp(what, async |amqp| {
            let mut censuses = Vec::new();
            for queue in queues {
                let shards = shards::discover(amqp, queue).await?;
                let suffix = &global.deferred_suffix;
                censuses.push(holds::census_of(mgmt, amqp, &shards, suffix, peek).await?);
            }
            Ok(censuses)
        })
        .await
}

/// Reads again, [`holds::STALL_RECHECK`] later, the quorum holds of
/// `censuses` that hold jobs past their delay, marks those that released
/// none of them, and returns them.
async fn mark_stalls(mgmt: &Management, censuses: &mut [Census]) -> Result<Vec<Stall>> {
    let due: Vec<(String, String)> = censuses
        .iter()
        .flat_map(|c| &c.holds)
        .filter(|h| h.kind == "quorum" && h.mismatch.is_none() && h.releasing.unwrap_or(0) > 0)
        .map(|h| (h.name.clone(), h.work_queue.clone()))
        .collect();
    if due.is_empty() {
        return Ok(Vec::new());
    }
    errln!(
        "{} quorum hold(s) hold jobs past their delay; reading them again in {} s to tell a \
         stalled hold from a busy one",
        due.len(),
        holds::STALL_RECHECK.as_secs()
    );
    let stalls = holds::stalled(mgmt, &due).await?;
    for hold in censuses.iter_mut().flat_map(|c| &mut c.holds) {
        hold.stalled = stalls.iter().any(|s| s.hold == hold.name);
    }
    Ok(stalls)
}

async fn run_prune(global: &Global, args: PruneArgs) -> Result<bool> {
    let mgmt = global.management()?;
    let censuses = censuses(global, &mgmt, "holds-prune", &args.queues, 0).await?;
    let items: Vec<_> = censuses.iter().flat_map(prune::plan).collect();
    let candidates = items.iter().filter(|i| i.prune).count();
    if !args.yes {
        global.print(&items, || {
            let mut table = Table::new(["HOLD QUEUE", "DELAY", "PRUNE", "WHY"]);
            for item in &items {
                table.row(vec![
                    crate::escape::line(&item.hold).into_owned(),
                    format_duration_ms(item.delay_ms),
                    if item.prune { "yes" } else { "no" }.to_owned(),
                    item.reason.clone(),
                ]);
            }
            out!("{}", table.render());
            outln!(
                "would prune {candidates} hold queue(s), each after watching it for ten seconds \
                 (a job that reaches it keeps it); run again with --yes to prune"
            );
        });
        return Ok(false);
    }
    let name = format!("queuey-cli-holds-prune-{}", std::process::id());
    let outcomes = prune::prune(
        &global.url,
        &global.tls(),
        &name,
        &global.deferred_suffix,
        mgmt,
        &items,
    )
    .await?;
    let failed = outcomes.iter().filter(|(_, o)| o.is_err()).count();
    let lookalikes: Vec<&prune::PruneItem> = items
        .iter()
        .filter(|i| i.reason.starts_with(prune::LOOKALIKE))
        .collect();
    let deleted = |outcome: &Result<_, _>| matches!(outcome, Ok(HoldPruned::Deleted { .. }));
    if global.json {
        let row = |item: &prune::PruneItem, outcome: String, deleted: bool| {
            serde_json::json!({
                "queue": item.queue, "hold": item.hold, "outcome": outcome, "deleted": deleted,
            })
        };
        let skipped = lookalikes
            .iter()
            .map(|item| row(item, format!("skipped: {}", item.reason), false));
        let done = (outcomes.iter()).map(|(item, o)| row(item, prune::describe(o), deleted(o)));
        print_json(&skipped.chain(done).collect::<Vec<_>>());
    } else {
        for item in &lookalikes {
            outln!(
                "skipped {}: named like a quorum hold, but {}",
                crate::escape::line(&item.hold),
                crate::escape::line(&item.reason)
            );
        }
        let mut table = Table::new(["HOLD QUEUE", "OUTCOME"]);
        let scrub = global.scrubber();
        for (item, outcome) in &outcomes {
            table.row(vec![
                crate::escape::line(&item.hold).into_owned(),
                scrub(&prune::describe(outcome)),
            ]);
        }
        out!("{}", table.render());
        let deleted = outcomes.iter().filter(|(_, o)| deleted(o)).count();
        outln!("deleted {deleted} of {candidates} hold queue(s)");
    }
    Ok(failed > 0)
}

fn print_census(census: &Census) {
    let shards = Shards {
        queue: census.queue.clone(),
        count: census.shards,
    };
    outln!(
        "{}: {} hold queues, {} jobs waiting",
        crate::escape::line(&shards.describe()),
        census.holds.len(),
        census.total_jobs()
    );
    if census.holds.is_empty() {
        return;
    }
    let now = now_ms();
    let sharded = shards.is_sharded();
    let mut table = Table::with_first(
        sharded.then_some("SHARD"),
        [
            "DELAY",
            "JOBS",
            "RELEASING",
            "CONSUMERS",
            "LEASE LEFT",
            "EARLIEST RELEASE",
            "LATEST RELEASE",
            "POLICY",
        ],
    );
    for h in &census.holds {
        let shard = sharded.then(|| shards::label(true, h.shard));
        table.row(
            shard.into_iter().chain([
                format_duration_ms(h.delay_ms),
                h.jobs.to_string(),
                match (h.kind, h.releasing) {
                    ("quorum", Some(n)) => n.to_string(),
                    ("quorum", None) => "?".to_owned(),
                    _ => "-".to_owned(),
                },
                h.consumers.to_string(),
                h.lease_left_ms
                    .map_or("in use".to_owned(), format_duration_ms),
                h.earliest_text(now),
                h.latest_text(now),
                if h.policies.is_empty() {
                    "-".to_owned()
                } else {
                    h.policies.join(",")
                },
            ]),
        );
    }
    out!("{}", table.render());
    for h in &census.holds {
        if let Some(why) = &h.mismatch {
            outln!(
                "note: {} is named like a hold but is not one queuey declared ({}); \
                 `queuey holds prune` leaves it alone",
                crate::escape::line(&h.name),
                crate::escape::line(why)
            );
        }
    }
    for note in release_notes(census) {
        outln!("note: {note}");
    }
    let releasing: u64 = census
        .holds
        .iter()
        .filter_map(|h| h.releasing)
        .fold(0, u64::saturating_add);
    let stalled = census.holds.iter().filter(|h| h.stalled).count();
    if stalled > 0 {
        outln!(
            "note: {stalled} quorum hold(s) released none of their jobs past their delay between \
             two reads {} s apart: they stopped releasing (see the problem below).",
            holds::STALL_RECHECK.as_secs()
        );
    } else if releasing > 0 {
        outln!(
            "note: {releasing} job(s) in quorum holds are past their delay and wait for the broker \
             to move them back; the holds released jobs between two reads, so they are busy, not \
             stalled."
        );
    }
}

/// Why some release times of `census` are bounds rather than read, each
/// reason once, with the holds it applies to.
pub(crate) fn release_notes(census: &Census) -> Vec<String> {
    let mut notes: Vec<(String, Vec<String>)> = Vec::new();
    for h in &census.holds {
        let Some(note) = &h.release_note else {
            continue;
        };
        let hold = crate::escape::line(&h.name).into_owned();
        match notes.iter_mut().find(|(n, _)| n == note) {
            Some((_, holds)) => holds.push(hold),
            None => notes.push((note.clone(), vec![hold])),
        }
    }
    notes
        .into_iter()
        .map(|(note, holds)| format!("{}: {note}", holds.join(", ")))
        .collect()
}
