//! `queuey queue pause|resume|paused`.

use std::process::ExitCode;

use clap::Subcommand;
use queuey_core::control::Command;
use queuey_ops::Result;
use queuey_ops::escape;
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

pub(crate) async fn run(global: &Global, cmd: QueueCommand) -> Result<ExitCode> {
    let fleet = global.fleet("queue").await?;
    let result = match cmd {
        QueueCommand::Pause { queue, yes, force } => {
            switch(global, &fleet, &queue, true, Act { yes, force }).await
        }
        QueueCommand::Resume { queue, yes, force } => {
            switch(global, &fleet, &queue, false, Act { yes, force }).await
        }
        QueueCommand::Paused => paused(global, &fleet).await,
    };
    fleet.close().await;
    result
}

/// What the operator allowed: acting at all, and acting against the
/// state's or the heartbeats' account.
#[derive(Debug, Clone, Copy)]
struct Act {
    yes: bool,
    force: bool,
}

async fn switch(
    global: &Global,
    fleet: &Fleet,
    queue: &str,
    pause: bool,
    act: Act,
) -> Result<ExitCode> {
    let Act { yes, force } = act;
    let amqp = global.connect("queue").await?;
    let counts = amqp.counts(queue).await;
    amqp.close().await;
    let Some(counts) = counts? else {
        return Err(queuey_ops::OpsError::UnknownQueue(queue.to_owned()));
    };
    let state = fleet.state().await?;
    let workers = fleet.workers().await?;
    let consuming = fleet::consumers_of(&workers, queue);
    let queue_shown = escape::line(queue);
    let verb = if pause { "pause" } else { "resume" };
    if state.is_paused(queue) == pause && !force {
        println!(
            "`{queue_shown}` is {} already; nothing to do (--force sends it all the same)",
            if pause { "paused" } else { "not paused" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let unheard = consuming.is_empty() && counts.consumers > 0;
    if unheard {
        let others = other_control_streams(global).await;
        eprintln!(
            "warning: {}",
            unheard_consumers(queue, counts.consumers, &global.control_stream, &others)
        );
        if yes && !force {
            return Err(queuey_ops::OpsError::Refused(format!(
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
        println!(
            "would {verb} `{queue_shown}` ({} jobs ready); {who}",
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
            "paused `{queue_shown}`: every worker stops taking its jobs within a second or two, lets \
             the running ones finish and hands back the ones it had not started; {who}"
        );
    } else {
        println!("resumed `{queue_shown}`: every worker takes its jobs again; {who}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Why the broker's consumers of `queue` and the heartbeats disagree, and
/// what to do.
fn unheard_consumers(queue: &str, consumers: u32, stream: &str, others: &[String]) -> String {
    let elsewhere = if others.is_empty() {
        String::new()
    } else {
        format!(
            " (this broker has other control streams: {})",
            others
                .iter()
                .map(|s| format!("`{}`", escape::line(s)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "RabbitMQ shows {consumers} consumer(s) of `{}`, but no worker whose heartbeats this tool \
         reads on `{}` consumes it: its workers may follow another control stream{elsewhere} \
         (give it with --control-stream), or log in as a RabbitMQ user this tool does not \
         trust (give it with --worker-user), or run without the control plane",
        escape::line(queue),
        escape::line(&queuey_rabbitmq::topology::heartbeat_stream_name(stream)),
    )
}

/// The control streams on the broker besides the tool's, found by their
/// heartbeat streams in the management listing; none when it cannot be
/// read.
async fn other_control_streams(global: &Global) -> Vec<String> {
    let Ok(mgmt) = global.management() else {
        return Vec::new();
    };
    let suffix = queuey_rabbitmq::topology::HEARTBEAT_STREAM_SUFFIX;
    let Ok(queues) = mgmt.queues(None).await else {
        return Vec::new();
    };
    queues
        .iter()
        .filter(|q| q.queue_type.as_deref() == Some("stream"))
        .filter_map(|q| q.name.strip_suffix(suffix))
        .filter(|stream| *stream != global.control_stream)
        .map(str::to_owned)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_consumed_out_of_sight_names_the_likely_causes() {
        let text = unheard_consumers(
            "app.emails",
            2,
            "queuey.control",
            &["billing.control".into()],
        );
        assert!(text.contains("2 consumer(s) of `app.emails`"), "{text}");
        assert!(text.contains("`queuey.control.workers`"), "{text}");
        assert!(text.contains("`billing.control`"), "{text}");
        assert!(
            text.contains("--control-stream") && text.contains("--worker-user"),
            "{text}"
        );
        let alone = unheard_consumers("q", 1, "queuey.control", &[]);
        assert!(!alone.contains("other control streams"), "{alone}");
    }
}
