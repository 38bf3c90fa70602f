//! `queuey queue pause|resume|paused`.

use crate::Result;
use crate::escape;
use crate::fleet::{self, Fleet};
use crate::out::{errln, out, outln};
use crate::time::{format_ms, now_ms};
use clap::Subcommand;
use queuey_core::control::Command;

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
        /// Send it even when the queue is paused already by the control stream's account, or
        /// when the broker shows consumers of the queue but no worker heartbeat does.
        #[arg(long)]
        force: bool,
    },
    /// Resume a paused queue on every worker.
    Resume {
        /// The work queue, by its name on the broker (namespace included).
        queue: String,
        /// Act; without it the command only prints what it would do.
        #[arg(long)]
        yes: bool,
        /// Send it even when the queue is not paused by the control stream's account, or when
        /// the broker shows consumers of the queue but no worker heartbeat does.
        #[arg(long)]
        force: bool,
    },
    /// List the paused queues.
    Paused,
}

pub(crate) async fn run(global: &Global, cmd: QueueCommand) -> Result<bool> {
    global
        .with_fleet("queue", async |fleet| match cmd {
            QueueCommand::Pause { queue, yes, force } => {
                switch(global, fleet, &queue, true, yes, force).await
            }
            QueueCommand::Resume { queue, yes, force } => {
                switch(global, fleet, &queue, false, yes, force).await
            }
            QueueCommand::Paused => paused(global, fleet).await,
        })
        .await
}

/// Pauses (`pause`) or resumes `queue`: with `yes` only, and against the
/// state's or the heartbeats' account only with `force`.
async fn switch(
    global: &Global,
    fleet: &Fleet,
    queue: &str,
    pause: bool,
    yes: bool,
    force: bool,
) -> Result<bool> {
    let counts = global
        .with_amqp("queue", async |amqp| amqp.require(queue).await)
        .await?;
    let state = fleet.state().await?;
    let workers = fleet.workers().await?;
    let consuming = fleet::consumers_of(&workers, queue);
    let queue_shown = escape::line(queue);
    let verb = if pause { "pause" } else { "resume" };
    if state.is_paused(queue) == pause && !force {
        outln!(
            "`{queue_shown}` is {} already; nothing to do (--force sends it all the same)",
            if pause { "paused" } else { "not paused" }
        );
        return Ok(false);
    }
    let unheard = fleet::Unheard::of(queue, counts.consumers, &consuming, &global.control_stream);
    if let Some(unheard) = unheard {
        let unheard = match global.management() {
            Ok(mgmt) => unheard.look_elsewhere(&mgmt).await,
            Err(_) => unheard,
        };
        errln!("warning: {}", escape::line(&unheard.to_string()));
        if yes && !force {
            return Err(crate::OpsError::Refused(format!(
                "not sending the {verb} of `{queue_shown}`: no worker that would read it consumes \
                 the queue (see the warning above); give the fleet's --control-stream, trust its \
                 workers' user with --worker-user, or add --force to send it to \
                 `{}` all the same",
                escape::line(&global.control_stream)
            )));
        }
    }
    let who = match consuming.len() {
        0 => "no worker consumes it right now".to_owned(),
        n => format!("{n} worker(s) consume it: {}", consuming.join(", ")),
    };
    if !yes {
        outln!(
            "would {verb} `{queue_shown}` ({} jobs ready); {who}",
            counts.messages
        );
        outln!("run again with --yes to {verb} it");
        return Ok(false);
    }
    let queue = queue.to_owned();
    fleet
        .send(if pause {
            Command::Pause { queue }
        } else {
            Command::Resume { queue }
        })
        .await?;
    if pause {
        outln!(
            "paused `{queue_shown}`: every worker stops taking its jobs within a second or two, lets \
             the running ones finish and hands back the ones it had not started; {who}"
        );
    } else {
        outln!("resumed `{queue_shown}`: every worker takes its jobs again; {who}");
    }
    Ok(false)
}

async fn paused(global: &Global, fleet: &Fleet) -> Result<bool> {
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
        return Ok(false);
    }
    if paused.is_empty() {
        outln!("no queue is paused");
        return Ok(false);
    }
    let now = now_ms();
    let mut table = Table::new(["QUEUE", "PAUSED SINCE", "FOR"]);
    for (queue, at) in paused {
        table.row(vec![
            queue,
            format_ms(at),
            crate::time::format_duration_ms(now - at),
        ]);
    }
    out!("{}", table.render());
    Ok(false)
}
