//! `queuey job show`, `queuey job cancel`, `queuey job cancellations` and
//! `queuey job revoke`.

use crate::escape;
use crate::find;
use crate::fleet::{self, Fleet};
use crate::out::{out, outln};
use crate::{OpsError, Result};
use clap::{Args, Subcommand};
use queuey_core::Uuid;
use queuey_core::control::{CancelFilter, CancelTarget, Command, PayloadMatch};

use super::Global;

#[derive(Debug, Subcommand)]
pub(crate) enum JobCommand {
    /// Where a job is: running on a worker, ready in a work queue, held until its release
    /// time, in a suspect queue, or dead with its reason.
    ///
    /// Searched in that order, stopping at the first hit: the workers' heartbeats, then the
    /// work queues (with --ready), their hold queues, their suspect queues (with --ready) and
    /// their dead-letter queues, each shard's too. A job that finished leaves no trace on the
    /// broker unless it had a result waiting for its caller.
    ///
    /// Cost: queues are read from their head with basic.get, at most --max-per-queue
    /// messages each, and every message read is handed back in place: while read, messages
    /// are invisible to consumers, and they come back marked redelivered. Holds and
    /// dead-letter queues have no consumer, so that is harmless there (a held job leaves its
    /// hold a few milliseconds later at most, never earlier; on RabbitMQ 4 each read counts
    /// as a delivery of a quorum hold's jobs, and a job read more than 20 times goes back to
    /// its queue early, where the worker holds it again for the rest of its delay). Work and
    /// suspect queues are read only with --ready: a worker's poison guard counts a job that
    /// comes back redelivered as returned unsettled, sends it to the back of its queue, and
    /// after more such returns to the suspect queue and then the dead-letter queue.
    ///
    /// Exit code 0 when found, 3 when not found.
    Show(ShowArgs),
    /// Cancel jobs wherever they wait (queue, hold, suspect queue, a retry on its way): they are
    /// dead-lettered with the reason `cancelled` instead of run; running ones are told.
    Cancel(CancelArgs),
    /// List the cancellations in force, with the id of the command that sent each (what
    /// `revoke` takes).
    Cancellations,
    /// Withdraw a cancellation: the jobs it covered run again when next taken (jobs it already
    /// dead-lettered stay there until redriven).
    Revoke {
        /// The id of the cancel command, as `cancel` printed it or `cancellations` lists it.
        #[arg(value_name = "COMMAND_ID")]
        record: String,
        /// Act; without it the command only prints what it would withdraw.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The job id (a UUID).
    #[arg(value_name = "ID")]
    id: String,
    /// A work queue to search, with its holds, suspect and dead-letter queues (repeatable; a
    /// sharded queue's name covers every shard) [default: the fleet's queues, as `queuey
    /// queues` lists them].
    #[arg(long = "queue", value_name = "QUEUE")]
    queues: Vec<String>,
    /// Read at most N messages of each queue; the output says which queues were only partly
    /// read.
    #[arg(long, value_name = "N", default_value_t = find::DEFAULT_MAX_PER_QUEUE)]
    max_per_queue: usize,
    /// Also read the work queues and suspect queues (jobs waiting for a worker): every job
    /// read ahead of this one comes back redelivered, which the workers' poison guard counts
    /// (see above).
    #[arg(long)]
    ready: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// Job ids to cancel.
    #[arg(value_name = "ID")]
    ids: Vec<String>,
    /// Cancel every job of this type enqueued until now.
    #[arg(long = "type", value_name = "TYPE")]
    job_type: Option<String>,
    /// Only jobs of this queue (its name on the broker).
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Only jobs whose payload field PATH (dotted: `user.id`) equals VALUE (JSON, else a string);
    /// repeatable, every one must hold.
    #[arg(long, value_name = "PATH=VALUE")]
    filter: Vec<String>,
    /// Act; without it the command only prints what it would cancel.
    #[arg(long)]
    yes: bool,
}

pub(crate) async fn run(global: &Global, cmd: JobCommand) -> Result<bool> {
    match cmd {
        JobCommand::Show(args) => show(global, args).await,
        JobCommand::Cancel(args) => {
            let commands = commands(&args)?;
            let cancel = async |fleet: &_| cancel(fleet, &args, commands).await;
            global.with_fleet("job", cancel).await
        }
        JobCommand::Cancellations => {
            let list = async |fleet: &_| cancellations(global, fleet).await;
            global.with_fleet("job", list).await
        }
        JobCommand::Revoke { record, yes } => {
            let record = Uuid::parse_str(&record).map_err(|_| {
                OpsError::Invalid(format!(
                    "`{}` is not a command id (a UUID, as `queuey job cancellations` lists them)",
                    escape::line(&record)
                ))
            })?;
            let revoke = async |fleet: &_| revoke(fleet, record, yes).await;
            global.with_fleet("job", revoke).await
        }
    }
}

/// `job show`: where the job is; `true` (exit code 3) when not found.
async fn show(global: &Global, args: ShowArgs) -> Result<bool> {
    let job_id = find::parse_job_id(&args.id)?;
    if args.max_per_queue == 0 {
        return Err(OpsError::Invalid(
            "--max-per-queue 0 would read nothing; give at least 1".to_owned(),
        ));
    }
    let mgmt = global.management()?;
    let workers = global
        .with_fleet("job-show", async |fleet| fleet.workers().await)
        .await?;
    let queues = if args.queues.is_empty() {
        let infos = mgmt.queues(None).await?;
        let every = crate::queues::work_queues(&infos, &global.dead_suffix);
        crate::queues::choose(false, every, &workers, false).0
    } else {
        args.queues
    };
    let search = find::Search {
        job_id,
        queues: &queues,
        max_per_queue: args.max_per_queue,
        read_ready: args.ready,
        dead_suffix: &global.dead_suffix,
        deferred_suffix: &global.deferred_suffix,
        suspect_suffix: &global.suspect_suffix,
    };
    let mut answer = global
        .with_amqp("job-show", async |amqp| {
            find::find(&search, amqp, &mgmt, &workers).await
        })
        .await?;
    // A listing's error may quote the management URL.
    let scrub = global.scrubber();
    answer.unsearched = answer.unsearched.iter().map(|t| scrub(t)).collect();
    global.print(&answer, || {
        for line in answer.lines() {
            outln!("{}", escape::line(&line));
        }
    });
    Ok(!answer.found())
}

/// What a cancellation covers, for a line of text.
fn target(target: &CancelTarget<'_>) -> String {
    match target {
        CancelTarget::Job(job_id) => format!("job {job_id}"),
        CancelTarget::Filter(filter) => describe(&Command::CancelMatching {
            filter: (*filter).clone(),
        })
        .trim_start_matches("would cancel ")
        .replace(" enqueued until now", " enqueued before it"),
        _ => "a cancellation this version cannot show".to_owned(),
    }
}

async fn cancellations(global: &Global, fleet: &Fleet) -> Result<bool> {
    let state = fleet.state().await?;
    let all = state.cancellations_sent();
    if global.json {
        let listed: Vec<serde_json::Value> = all
            .iter()
            .map(|c| {
                serde_json::json!({
                    "command_id": c.record,
                    "sent_at_ms": c.at_ms,
                    "cancels": target(&c.target),
                })
            })
            .collect();
        super::print_json(&listed);
        return Ok(false);
    }
    if all.is_empty() {
        outln!("no cancellation is in force");
        return Ok(false);
    }
    let mut table = super::table::Table::new(["COMMAND ID", "SENT", "CANCELS"]);
    for c in &all {
        table.row(vec![
            c.record.to_string(),
            crate::time::format_ms(c.at_ms),
            target(&c.target),
        ]);
    }
    out!("{}", table.render());
    Ok(false)
}

async fn revoke(fleet: &Fleet, record: Uuid, yes: bool) -> Result<bool> {
    let state = fleet.state().await?;
    let Some(found) = state
        .cancellations_sent()
        .into_iter()
        .find(|c| c.record == record)
    else {
        outln!(
            "no cancellation in force was sent by command {record}; nothing to withdraw (`queuey \
             job cancellations` lists them)"
        );
        return Ok(false);
    };
    outln!(
        "would withdraw the cancellation of {}",
        target(&found.target)
    );
    if !yes {
        outln!("run again with --yes to withdraw it");
        return Ok(false);
    }
    fleet.send(Command::Revoke { record }).await?;
    outln!(
        "withdrawn: the jobs it covered run again when next taken; those it already sent to the \
         dead-letter queue stay there until redriven"
    );
    Ok(false)
}

/// The commands the arguments ask for, checked before anything connects.
fn commands(args: &CancelArgs) -> Result<Vec<Command>> {
    let by_filter = args.job_type.is_some() || args.queue.is_some() || !args.filter.is_empty();
    if args.ids.is_empty() && !by_filter {
        return Err(OpsError::Invalid(
            "say what to cancel: job ids, or --type/--queue/--filter".to_owned(),
        ));
    }
    if !args.ids.is_empty() && by_filter {
        return Err(OpsError::Invalid(
            "give either job ids or --type/--queue/--filter, not both".to_owned(),
        ));
    }
    let mut commands = Vec::new();
    for id in &args.ids {
        let job_id = Uuid::parse_str(id).map_err(|_| {
            OpsError::Invalid(format!(
                "`{id}` is not a job id (a UUID such as 67e55044-10b1-426f-9247-bb680e5fe0c8)"
            ))
        })?;
        commands.push(Command::Cancel { job_id });
    }
    if by_filter {
        let mut filter = CancelFilter::new();
        filter.queue = args.queue.clone();
        filter.job_type = args.job_type.clone();
        for text in &args.filter {
            filter
                .payload
                .push(PayloadMatch::parse(text).map_err(|e| OpsError::Invalid(e.to_string()))?);
        }
        commands.push(
            filter
                .into_command()
                .map_err(|e| OpsError::Invalid(e.to_string()))?,
        );
    }
    Ok(commands)
}

async fn cancel(fleet: &Fleet, args: &CancelArgs, commands: Vec<Command>) -> Result<bool> {
    let workers = fleet.workers().await?;
    for command in &commands {
        outln!("{}", describe(command));
        let running: Vec<String> = fleet::running_where(&workers, |job| match command {
            Command::Cancel { job_id } => job.job_id == *job_id,
            Command::CancelMatching { filter } => filter.may_match(&job.queue, &job.job_type),
            _ => false,
        })
        .map(|(worker, job)| fleet::running_line(worker, job))
        .collect();
        if running.is_empty() {
            outln!("  running now: none that matches");
        }
        for line in running {
            outln!("{line}");
        }
    }
    if !args.yes {
        outln!("run again with --yes to cancel");
        return Ok(false);
    }
    for command in commands {
        let sent = fleet.send(command).await?;
        outln!(
            "sent command {} (withdraw it with `queuey job revoke {} --yes`)",
            sent.id,
            sent.id
        );
    }
    outln!(
        "cancelled: the next worker to take each job dead-letters it with the reason \
         `cancelled` (redrive it from there if needed); a running one is told through its \
         context and is not killed"
    );
    Ok(false)
}

fn describe(command: &Command) -> String {
    match command {
        Command::Cancel { job_id } => format!("would cancel job {job_id}, wherever it waits"),
        Command::CancelMatching { filter } => {
            let mut parts = Vec::new();
            if let Some(t) = &filter.job_type {
                parts.push(format!("of type `{}`", escape::line(t)));
            }
            if let Some(q) = &filter.queue {
                parts.push(format!("on `{}`", escape::line(q)));
            }
            for m in &filter.payload {
                parts.push(format!(
                    "with `{}` = {}",
                    escape::line(&m.path.join(".")),
                    escape::line(&m.value.to_string())
                ));
            }
            format!(
                "would cancel every job {} enqueued until now, wherever it waits (jobs enqueued \
                 later are not touched)",
                parts.join(" ")
            )
        }
        other => format!("would send `{}`", other.as_str()),
    }
}
