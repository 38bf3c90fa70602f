//! Operator tools for queuey, as a library: the operations behind the
//! `queuey` command-line tool and its web dashboard, callable from any
//! program.
//!
//! | module | what it does |
//! |---|---|
//! | [`dead`] | list, group, show, redrive, purge (with an export) and import dead letters |
//! | [`holds`] | the census of a queue's hold queues |
//! | [`shards`] | the broker queues of a sharded queue, found once for every command |
//! | [`prune`] | which empty hold queues to delete, and deleting them without losing a job |
//! | [`topology`] | compare the broker with a queue set; declare what is missing |
//! | [`schedules`] | the schedules of periodic jobs: leader, last and next tick |
//! | [`fleet`] | the running workers, and the commands that pause queues and cancel jobs |
//! | [`mgmt`] | the RabbitMQ management API client |
//! | [`doctor`] | connectivity, broker version, plugins, alarms |
//! | [`web`] | the dashboard: server-rendered pages over the same operations |
//! | [`browse`] | reading a queue without losing a message or its order |
//! | [`escape`] | broker text made safe to print on a terminal |
//!
//! A sharded queue (`QueueConfig::shards`) is one queue to the tools: its
//! lane and every shard, each with its own dead-letter and hold queues, are
//! read, counted and acted on together, and what they list says which
//! shard each item is on; see [`shards`].
//!
//! Mutating operations come in two halves, a plan that changes nothing and
//! the action, so that every front end can preview first.
//!
//! ```no_run
//! use queuey_ops::{Amqp, dead};
//!
//! # async fn run() -> queuey_ops::Result<()> {
//! let amqp = Amqp::connect("amqp://guest:guest@127.0.0.1:5672/%2f", "ops-example").await?;
//! let dead_queue = queuey_ops::dead_queue_of("emails", queuey_ops::DEFAULT_DEAD_SUFFIX)?;
//! // One pass over the queue, folded as it is read: memory does not grow
//! // with the number of dead letters.
//! let stats = dead::read_stats(&amqp, &dead_queue, &dead::Filter::all()).await?;
//! for group in stats.by_fingerprint {
//!     let fingerprint = queuey_ops::escape::line(&group.fingerprint);
//!     println!("{:>5}  {fingerprint}", group.count);
//! }
//! # Ok(()) }
//! ```

pub mod amqp;
mod argument;
pub mod browse;
pub mod dead;
pub mod doctor;
mod error;
pub mod escape;
pub mod fleet;
pub mod headers;
pub mod holds;
pub mod mgmt;
pub mod prune;
pub mod schedules;
pub mod shards;
pub mod time;
pub mod tls;
pub mod topology;
pub mod web;

pub use amqp::{Amqp, QueueCounts, redact_url};
pub use error::{OpsError, Result};
pub use tls::TlsFiles;

/// The default dead-letter suffix (`q` → `q.dead`).
pub const DEFAULT_DEAD_SUFFIX: &str = ".dead";
/// The default hold-queue suffix (`q` → `q.deferred.{ttl_ms}`).
pub const DEFAULT_DEFERRED_SUFFIX: &str = ".deferred";
/// The default suspect-queue suffix of the poison guard (`q` → `q.suspect`).
pub const DEFAULT_SUSPECT_SUFFIX: &str = ".suspect";

/// The dead-letter queue of `queue`: `queue` itself when it already ends in
/// `dead_suffix`, else `{queue}{dead_suffix}`.
///
/// An empty `dead_suffix` is refused ([`OpsError::Invalid`]): the
/// "dead-letter queue" would be the live work queue itself, and reading,
/// redriving or purging it would take live jobs.
pub fn dead_queue_of(queue: &str, dead_suffix: &str) -> Result<String> {
    if dead_suffix.is_empty() {
        return Err(empty_suffix("dead-letter", "dead_suffix", queue));
    }
    if queue.ends_with(dead_suffix) {
        Ok(queue.to_owned())
    } else {
        Ok(queuey_rabbitmq::topology::dead_letter_queue_name(
            queue,
            dead_suffix,
        ))
    }
}

/// The work queue a dead-letter queue belongs to: `queue` without
/// `dead_suffix` when it ends in it, else `queue` (the inverse of
/// [`dead_queue_of`]). An empty `dead_suffix` is refused as there.
pub fn work_queue_of(queue: &str, dead_suffix: &str) -> Result<String> {
    if dead_suffix.is_empty() {
        return Err(empty_suffix("dead-letter", "dead_suffix", queue));
    }
    Ok(queue.strip_suffix(dead_suffix).unwrap_or(queue).to_owned())
}

/// Refuses suffixes that would make the tools act on the wrong queues: an
/// empty one (the dead-letter or suspect "queue" of `q` would be `q`
/// itself, its hold queues `q.<ms>`), or one suffix used for two roles (the
/// dead-letter queue would also be the suspect queue, or a hold family).
///
/// The `queuey` tool checks its `--dead-suffix`, `--deferred-suffix` and
/// `--suspect-suffix` with it before any command.
pub fn check_suffixes(dead: &str, deferred: &str, suspect: &str) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_shared_suffix_is_refused() {
        assert_eq!(dead_queue_of("emails", ".dead").unwrap(), "emails.dead");
        assert_eq!(
            dead_queue_of("emails.dead", ".dead").unwrap(),
            "emails.dead"
        );
        assert_eq!(work_queue_of("emails.dead", ".dead").unwrap(), "emails");
        assert_eq!(work_queue_of("emails", ".dead").unwrap(), "emails");
        let err = dead_queue_of("emails", "").unwrap_err().to_string();
        assert!(err.contains("empty") && err.contains("`emails`"), "{err}");
        assert!(work_queue_of("emails", "").is_err());

        assert!(check_suffixes(".dead", ".deferred", ".suspect").is_ok());
        for (dead, deferred, suspect, named) in [
            ("", ".deferred", ".suspect", "dead_suffix"),
            (".dead", "", ".suspect", "deferred_suffix"),
            (".dead", ".deferred", "", "suspect_suffix"),
            (".x", ".deferred", ".x", "suspect_suffix"),
            (".x", ".x", ".suspect", "deferred_suffix"),
            (".dead", ".x", ".x", "suspect_suffix"),
        ] {
            let err = check_suffixes(dead, deferred, suspect)
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{err}");
        }
    }
}
