//! `queuey queue pause|resume|paused`.

use std::process::ExitCode;

use clap::Subcommand;
use queuey_core::control::Command;
use queuey_ops::Result;
use queuey_ops::fleet::{self, Fleet};
use queuey_ops::time::{format_ms, now_ms};

use super::table::Table;
use super::{Global, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum QueueCommand {
    /// Pause a queue on every worker: running jobs finish, nothing new starts, other queues keep flowing.
    Pause {
        /// The work queue, by its name on the broker (namespace included).
        queue: String,
        /// Act; without it the command only prints what it would do.
        #[arg(long)]
        yes: bool,
    },
    /// Resume a paused queue on every worker.
    Resume {
        /// The work queue, by its name on the broker (namespace included).
        queue: String,
        /// Act; without it the command only prints what it would do.
        #[arg(long)]
        yes: bool,
    },
    /// List the paused queues.
    Paused,
}

pub(crate) async fn run(global: &Global, cmd: QueueCommand) -> Result<ExitCode> {
    let fleet = global.fleet("queue").await?;
    let result = match cmd {
        QueueCommand::Pause { queue, yes } => switch(global, &fleet, &queue, true, yes).await,
        QueueCommand::Resume { queue, yes } => switch(global, &fleet, &queue, false, yes).await,
        QueueCommand::Paused => paused(global, &fleet).await,
    };
    fleet.close().await;
    result
}

async fn switch(
    global: &Global,
    fleet: &Fleet,
    queue: &str,
    pause: bool,
    yes: bool,
) -> Result<ExitCode> {
    let amqp = global.connect("queue").await?;
    let counts = amqp.counts(queue).await;
    amqp.close().await;
    let Some(counts) = counts? else {
        return Err(queuey_ops::OpsError::UnknownQueue(queue.to_owned()));
    };
    let state = fleet.state().await?;
    let workers = fleet.workers().await?;
    let consuming: Vec<String> = workers
        .iter()
        .filter(|w| w.queues.iter().any(|q| q == queue))
        .map(fleet::label)
        .collect();
    let verb = if pause { "pause" } else { "resume" };
    if state.is_paused(queue) == pause {
        println!(
            "`{queue}` is {} already; nothing to do",
            if pause { "paused" } else { "not paused" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let who = match consuming.len() {
        0 => "no worker consumes it right now".to_owned(),
        n => format!("{n} worker(s) consume it: {}", consuming.join(", ")),
    };
    if !yes {
        println!(
            "would {verb} `{queue}` ({} jobs ready); {who}",
            counts.messages
        );
        println!("run again with --yes to {verb} it");
        return Ok(ExitCode::SUCCESS);
    }
    let command = if pause {
        Command::Pause {
            queue: queue.to_owned(),
        }
    } else {
        Command::Resume {
            queue: queue.to_owned(),
        }
    };
    fleet.send(command, &fleet::signature("queuey")).await?;
    if pause {
        println!(
            "paused `{queue}`: every worker stops taking its jobs within a second or two, lets \
             the running ones finish and hands back the ones it had not started; {who}"
        );
    } else {
        println!("resumed `{queue}`: every worker takes its jobs again; {who}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn paused(global: &Global, fleet: &Fleet) -> Result<ExitCode> {
    let state = fleet.state().await?;
    let paused: Vec<(String, i64)> = state
        .paused()
        .map(|(q, at)| (q.to_owned(), i64::try_from(at).unwrap_or(i64::MAX)))
        .collect();
    if global.json {
        let listed: Vec<serde_json::Value> = paused
            .iter()
            .map(|(q, at)| serde_json::json!({"queue": q, "paused_at_ms": at}))
            .collect();
        print_json(&listed);
        return Ok(ExitCode::SUCCESS);
    }
    if paused.is_empty() {
        println!("no queue is paused");
        return Ok(ExitCode::SUCCESS);
    }
    let now = now_ms();
    let mut table = Table::new(["QUEUE", "PAUSED SINCE", "FOR"]);
    for (queue, at) in paused {
        table.row(vec![
            queue,
            format_ms(at),
            queuey_ops::time::format_duration_ms(now - at),
        ]);
    }
    print!("{}", table.render());
    Ok(ExitCode::SUCCESS)
}
