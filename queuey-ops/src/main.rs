//! `queuey`: the operator's command-line tool for queuey deployments, and
//! its web dashboard.
//!
//! A sharded queue (`QueueConfig::shards`) is one queue to the tools: its
//! lane and every shard, each with its own dead-letter and hold queues, are
//! read, counted and acted on together, and what they list says which
//! shard each item is on; see [`shards`].
//!
//! Mutating operations come in two halves, a plan that changes nothing and
//! the action, so that every front end can preview first.

mod amqp;
mod argument;
mod browse;
mod cli;
mod dead;
mod doctor;
mod error;
mod escape;
mod find;
mod fleet;
mod headers;
mod holds;
mod mgmt;
mod out;
mod prune;
mod queues;
mod schedules;
mod shards;
mod time;
mod tls;
mod topology;
mod web;

#[cfg(test)]
mod tests;

pub(crate) use amqp::Amqp;
pub(crate) use error::{OpsError, Result};
pub(crate) use tls::TlsFiles;

/// The default dead-letter suffix (`q` → `q.dead`).
pub(crate) const DEFAULT_DEAD_SUFFIX: &str = ".dead";
/// The default hold-queue suffix (`q` → `q.deferred.quorum.{ttl_ms}`, or
/// `q.deferred.{ttl_ms}` for classic holds).
pub(crate) const DEFAULT_DEFERRED_SUFFIX: &str = ".deferred";
/// The default suspect-queue suffix of the poison guard (`q` → `q.suspect`).
pub(crate) const DEFAULT_SUSPECT_SUFFIX: &str = ".suspect";

/// The dead-letter queue of `queue`: `queue` itself when it already ends in
/// `dead_suffix`, else `{queue}{dead_suffix}`.
///
/// An empty `dead_suffix` is refused ([`OpsError::Invalid`]): the
/// "dead-letter queue" would be the live work queue itself, and reading,
/// redriving or purging it would take live jobs.
pub(crate) fn dead_queue_of(queue: &str, dead_suffix: &str) -> Result<String> {
    let work_queue = work_queue_of(queue, dead_suffix)?;
    Ok(queuey_rabbitmq::topology::dead_letter_queue_name(
        &work_queue,
        dead_suffix,
    ))
}

/// The work queue a dead-letter queue belongs to: `queue` without
/// `dead_suffix` when it ends in it, else `queue` (the inverse of
/// [`dead_queue_of`]). An empty `dead_suffix` is refused as there.
pub(crate) fn work_queue_of(queue: &str, dead_suffix: &str) -> Result<String> {
    if dead_suffix.is_empty() {
        return Err(empty_suffix("dead-letter", "dead_suffix", queue));
    }
    Ok(queue.strip_suffix(dead_suffix).unwrap_or(queue).to_owned())
}

/// Refuses suffixes that would make the tools act on the wrong queues: an
/// empty one (the dead-letter or suspect "queue" of `q` would be `q`
/// itself, its hold queues `q.quorum.<ms>`), or one suffix used for two roles (the
/// dead-letter queue would also be the suspect queue, or a hold family).
///
/// The `queuey` tool checks its `--dead-suffix`, `--deferred-suffix` and
/// `--suspect-suffix` with it before any command.
pub(crate) fn check_suffixes(dead: &str, deferred: &str, suspect: &str) -> Result<()> {
    let roles = [
        ("dead-letter", "dead_suffix", dead),
        ("hold-queue", "deferred_suffix", deferred),
        ("suspect", "suspect_suffix", suspect),
    ];
    for (role, setting, suffix) in roles {
        if suffix.is_empty() {
            return Err(empty_suffix(role, setting, "emails"));
        }
    }
    for (i, (role, setting, suffix)) in roles.iter().enumerate() {
        for (other, other_setting, other_suffix) in &roles[i + 1..] {
            if suffix == other_suffix {
                return Err(OpsError::Invalid(format!(
                    "the {role} suffix ({setting}) and the {other} suffix ({other_setting}) are \
                     both `{}`: one queue name would stand for two roles; give each its own \
                     suffix (defaults: `{DEFAULT_DEAD_SUFFIX}`, `{DEFAULT_DEFERRED_SUFFIX}`, \
                     `{DEFAULT_SUSPECT_SUFFIX}`)",
                    escape::line(suffix)
                )));
            }
        }
    }
    Ok(())
}

fn empty_suffix(role: &str, setting: &str, queue: &str) -> OpsError {
    OpsError::Invalid(format!(
        "the {role} suffix ({setting}) is empty: the {role} queue of `{}` would be the work \
         queue itself, so the tools would act on live jobs; give a suffix (defaults: \
         `{DEFAULT_DEAD_SUFFIX}`, `{DEFAULT_DEFERRED_SUFFIX}`, `{DEFAULT_SUSPECT_SUFFIX}`)",
        escape::line(queue)
    ))
}

use crate::out::errln;
use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let scrub = args.global.scrubber();
    match cli::run(args).await {
        // Output cut short by a failing stdout is a failed run; a reader
        // that went away (`| head`) is not.
        Ok(_) if out::failed() => ExitCode::FAILURE,
        Ok(code) => code,
        Err(e) => {
            // Every error text, the broker client's included, leaves without
            // the passwords the tool was given and without control characters.
            let text = scrub(&e.to_string());
            errln!("error: {}", crate::escape::line(&text));
            ExitCode::FAILURE
        }
    }
}
