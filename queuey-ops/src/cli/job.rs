//! `queuey job cancel`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use queuey_core::Uuid;
use queuey_core::control::{CancelFilter, Command, PayloadMatch};
use queuey_ops::fleet::{self, Fleet};
use queuey_ops::time::format_duration_ms;
use queuey_ops::{OpsError, Result};

use super::Global;

#[derive(Debug, Subcommand)]
pub(crate) enum JobCommand {
    /// Cancel jobs wherever they wait (queue, hold, suspect queue, a retry on its way): they are
    /// dead-lettered with the reason `cancelled` instead of run; running ones are told.
    Cancel(CancelArgs),
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

pub(crate) async fn run(global: &Global, cmd: JobCommand) -> Result<ExitCode> {
    let JobCommand::Cancel(args) = cmd;
    let commands = commands(&args)?;
    let fleet = global.fleet("job").await?;
    let result = cancel(&fleet, &args, commands).await;
    fleet.close().await;
    result
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

async fn cancel(fleet: &Fleet, args: &CancelArgs, commands: Vec<Command>) -> Result<ExitCode> {
    let workers = fleet.workers().await?;
    for command in &commands {
        println!("{}", describe(command));
        let running: Vec<String> = fleet::running_where(&workers, |job| match command {
            Command::Cancel { job_id } => job.job_id == *job_id,
            Command::CancelMatching { filter } => filter.may_match(&job.queue, &job.job_type),
            _ => false,
        })
        .map(|(worker, job)| {
            format!(
                "  running now: {} ({}, attempt {}) on {} for {}",
                job.job_id,
                job.job_type,
                job.attempt,
                fleet::label(worker),
                format_duration_ms(
                    i64::try_from(fleet::running_for(worker, job).as_millis()).unwrap_or(i64::MAX)
                )
            )
        })
        .collect();
        if running.is_empty() {
            println!("  running now: none that matches");
        }
        for line in running {
            println!("{line}");
        }
    }
    if !args.yes {
        println!("run again with --yes to cancel");
        return Ok(ExitCode::SUCCESS);
    }
    let by = fleet::signature("queuey");
    for command in commands {
        fleet.send(command, &by).await?;
    }
    println!(
        "cancelled: the next worker to take each job dead-letters it with the reason \
         `cancelled` (redrive it from there if needed); a running one is told through its \
         context and is not killed"
    );
    Ok(ExitCode::SUCCESS)
}

fn describe(command: &Command) -> String {
    match command {
        Command::Cancel { job_id } => format!("would cancel job {job_id}, wherever it waits"),
        Command::CancelMatching { filter } => {
            let mut parts = Vec::new();
            if let Some(t) = &filter.job_type {
                parts.push(format!("of type `{t}`"));
            }
            if let Some(q) = &filter.queue {
                parts.push(format!("on `{q}`"));
            }
            for m in &filter.payload {
                parts.push(format!("with `{}` = {}", m.path.join("."), m.value));
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
