//! Pruning hold queues: which hold queues of a work queue `queuey holds
//! prune` deletes, and the deletion itself.
//!
//! Only quorum holds are pruned (classic ones expire by themselves), only
//! queues that are holds as queuey declares them (a quorum queue whose
//! delay and dead-letter arguments lead back to its work queue: a queue
//! that merely has a hold's name is kept, whatever it holds), and only
//! those the census finds empty: no job waiting for its delay, none
//! past it waiting to be moved back, no consumer. The deletion goes
//! through the library's
//! [`RabbitMqBackend::prune_hold`](queuey_rabbitmq::RabbitMqBackend::prune_hold),
//! which watches each hold for ten seconds first and keeps it if a job
//! reaches it meanwhile, and asks the management API for the jobs that
//! AMQP does not count before the watch and again before the deletion.

use futures::StreamExt;
use futures::future::BoxFuture;
use queuey_core::{BackendError, BackendErrorKind};
use queuey_rabbitmq::{HoldCensus, HoldPruned, HoldQueues, RabbitMqOptions};
use serde::Serialize;

use crate::holds::{Census, HoldQueue, hold_mismatch};
use crate::mgmt::{Management, QueueInfo};
use crate::tls::TlsFiles;

/// How a queue named like a hold but unlike one is described: the start
/// of its [`PruneItem::reason`].
pub(crate) const LOOKALIKE: &str = "not a hold queuey declared";

/// How many holds are pruned at once (each takes ten seconds or more).
const PRUNED_AT_ONCE: usize = 8;

/// Every job of a hold queue by the management API: its `messages`, which
/// counts the jobs past their delay that a quorum hold has not moved back
/// yet (AMQP does not).
///
/// Each count also checks, from the same answer, that the queue is still a
/// quorum hold as queuey declares it (see [`hold_mismatch`]): a queue
/// deleted and declared again as something else since the census fails the
/// count, and the pruner keeps it.
#[derive(Debug, Clone)]
struct ManagementCensus {
    mgmt: Management,
    deferred_suffix: String,
}

impl HoldCensus for ManagementCensus {
    fn jobs<'a>(&'a self, hold: &'a str) -> BoxFuture<'a, Result<Option<u64>, queuey_core::Error>> {
        Box::pin(async move {
            let fail = |why: String| {
                queuey_core::Error::Backend(BackendError::new(BackendErrorKind::Other, why))
            };
            let info = self.mgmt.queue(hold).await.map_err(|e| {
                fail(format!(
                    "counting the jobs of `{hold}` through the management API: {e}"
                ))
            })?;
            let Some(info) = info else {
                return Ok(None);
            };
            if let Some(why) = not_a_quorum_hold(&info, &self.deferred_suffix) {
                return Err(fail(format!(
                    "`{hold}` is named like a quorum hold but is not one queuey declared ({why}); \
                     it is kept"
                )));
            }
            Ok(info.messages)
        })
    }
}

/// Why the queue `info` is not a quorum hold of the work queue its
/// dead-letter routing key names, if it is not.
fn not_a_quorum_hold(info: &QueueInfo, deferred_suffix: &str) -> Option<String> {
    let work_queue = info
        .arguments
        .get("x-dead-letter-routing-key")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    match HoldQueues::Quorum.parse(work_queue, deferred_suffix, &info.name) {
        Some(delay_ms) => hold_mismatch(info, work_queue, HoldQueues::Quorum, delay_ms),
        None => Some("its dead-letter routing key does not name the work queue of its name".into()),
    }
}

/// One hold queue, and whether `queuey holds prune` deletes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PruneItem {
    /// The work queue the hold releases into (for a shard's hold, that
    /// shard).
    pub(crate) queue: String,
    pub(crate) hold: String,
    pub(crate) delay_ms: u64,
    /// Whether it is a candidate (empty, unconsumed quorum hold).
    pub(crate) prune: bool,
    /// Why it is kept, or `empty` for a candidate. A queue that only looks
    /// like a hold (its type or arguments are not those of queuey's holds)
    /// is kept with a reason starting with [`LOOKALIKE`].
    pub(crate) reason: String,
}

/// The hold queues of `census` (of a sharded queue: the lane's and every
/// shard's) with, for each, whether it is pruned. Classic holds are left
/// out: they expire by themselves.
pub(crate) fn plan(census: &Census) -> Vec<PruneItem> {
    census
        .holds
        .iter()
        .filter(|h| h.kind == "quorum")
        .map(|h| {
            let reason = keep_reason(h);
            PruneItem {
                queue: h.work_queue.clone(),
                hold: h.name.clone(),
                delay_ms: h.delay_ms,
                prune: reason.is_none(),
                reason: reason.unwrap_or_else(|| "empty".to_owned()),
            }
        })
        .collect()
}

/// Why the census keeps a quorum hold, if it does.
fn keep_reason(h: &HoldQueue) -> Option<String> {
    if let Some(why) = &h.mismatch {
        return Some(format!("{LOOKALIKE}: {why}"));
    }
    if h.consumers > 0 {
        return Some(format!("{} consumer(s)", h.consumers));
    }
    if h.jobs > 0 {
        return Some(format!("{} job(s) waiting", h.jobs));
    }
    match h.releasing {
        None => Some("no statistics yet".to_owned()),
        Some(0) => None,
        Some(n) => Some(format!("{n} job(s) past their delay, not moved back yet")),
    }
}

/// Prunes the candidates of `items` through a backend of its own on `url`
/// (connection `name`), asking `mgmt` for the jobs AMQP does not count.
/// Returns each candidate with its outcome, in the order given.
pub(crate) async fn prune(
    url: &str,
    tls: &TlsFiles,
    name: &str,
    deferred_suffix: &str,
    mgmt: Management,
    items: &[PruneItem],
) -> crate::Result<Vec<(PruneItem, Result<HoldPruned, String>)>> {
    let options = RabbitMqOptions::default()
        .deferred_suffix(deferred_suffix)
        .prune_holds_after(None)
        .hold_census(ManagementCensus {
            mgmt,
            deferred_suffix: deferred_suffix.to_owned(),
        });
    let backend = crate::amqp::backend(url, tls, name, options).await?;
    let backend_ref = &backend;
    let outcomes = futures::stream::iter(items.iter().filter(|i| i.prune))
        .map(|item| async move {
            let outcome = backend_ref
                .prune_hold(&item.queue, &item.hold)
                .await
                .map_err(|e| e.to_string());
            (item.clone(), outcome)
        })
        .buffered(PRUNED_AT_ONCE)
        .collect()
        .await;
    let _ = backend.close().await;
    Ok(outcomes)
}

/// What an outcome says, for a table.
pub(crate) fn describe(outcome: &Result<HoldPruned, String>) -> String {
    match outcome {
        Ok(HoldPruned::Deleted { rescued: 0 }) => "deleted".to_owned(),
        Ok(HoldPruned::Deleted { rescued }) => {
            format!("deleted; {rescued} job(s) that reached it meanwhile moved to the work queue")
        }
        Ok(HoldPruned::InUse { jobs }) => format!("kept: in use ({jobs} job(s) seen)"),
        Ok(HoldPruned::Consumed { consumers }) => format!("kept: {consumers} consumer(s)"),
        Ok(HoldPruned::Missing) => "already gone".to_owned(),
        Ok(HoldPruned::Unverified) => {
            "kept: the management API could not count its jobs".to_owned()
        }
        Ok(other) => format!("kept: {other:?}"),
        Err(e) => format!("error: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(name: &str, kind: &'static str, jobs: u64, releasing: Option<u64>) -> HoldQueue {
        HoldQueue {
            name: name.to_owned(),
            work_queue: "q".to_owned(),
            shard: None,
            kind,
            delay_ms: 1_000,
            jobs,
            releasing,
            consumers: 0,
            expires_ms: None,
            message_ttl_ms: None,
            lease_left_ms: None,
            earliest_release_ms: None,
            latest_release_ms: None,
            jobs_read: 0,
            releases_by_ms: None,
            release_note: None,
            policies: Vec::new(),
            mismatch: None,
            stalled: false,
        }
    }

    #[test]
    fn a_queue_that_only_looks_like_a_hold_is_kept_whatever_it_holds() {
        let census = Census {
            queue: "q".to_owned(),
            shards: 0,
            holds: vec![HoldQueue {
                mismatch: Some("a classic queue, not quorum".to_owned()),
                ..hold("q.deferred.quorum.5000", "quorum", 0, Some(0))
            }],
        };
        let plan = plan(&census);
        assert!(!plan[0].prune);
        assert_eq!(
            plan[0].reason,
            "not a hold queuey declared: a classic queue, not quorum"
        );
        assert!(plan[0].reason.starts_with(LOOKALIKE));
    }

    #[test]
    fn the_pruners_census_refuses_a_queue_that_is_no_longer_a_hold() {
        let info = |queue_type: &str, routing_key: &str| -> QueueInfo {
            serde_json::from_value(serde_json::json!({
                "name": "q.deferred.quorum.5000",
                "type": queue_type,
                "arguments": {
                    "x-queue-type": queue_type,
                    "x-message-ttl": 5000,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": routing_key,
                    "x-dead-letter-strategy": "at-least-once",
                },
            }))
            .unwrap()
        };
        assert_eq!(not_a_quorum_hold(&info("quorum", "q"), ".deferred"), None);
        assert!(not_a_quorum_hold(&info("classic", "q"), ".deferred").is_some());
        assert!(not_a_quorum_hold(&info("quorum", "elsewhere"), ".deferred").is_some());
        assert!(not_a_quorum_hold(&info("quorum", "q"), ".held").is_some());
    }

    #[test]
    fn a_shards_hold_is_pruned_for_that_shard() {
        let census = Census {
            queue: "q".to_owned(),
            shards: 2,
            holds: vec![HoldQueue {
                work_queue: "q.s1".to_owned(),
                shard: Some(1),
                ..hold("q.s1.deferred.quorum.1", "quorum", 0, Some(0))
            }],
        };
        let plan = plan(&census);
        assert_eq!(plan[0].queue, "q.s1");
        assert!(plan[0].prune);
    }

    #[test]
    fn only_empty_quorum_holds_with_statistics_are_pruned() {
        let mut consumed = hold("q.deferred.quorum.5", "quorum", 0, Some(0));
        consumed.consumers = 1;
        let census = Census {
            queue: "q".to_owned(),
            shards: 0,
            holds: vec![
                hold("q.deferred.quorum.1", "quorum", 0, Some(0)),
                hold("q.deferred.quorum.2", "quorum", 3, Some(0)),
                hold("q.deferred.quorum.3", "quorum", 0, Some(2)),
                hold("q.deferred.quorum.4", "quorum", 0, None),
                consumed,
                hold("q.deferred.6", "classic", 0, None),
            ],
        };
        let plan = plan(&census);
        let verdicts: Vec<(&str, bool, &str)> = plan
            .iter()
            .map(|i| (i.hold.as_str(), i.prune, i.reason.as_str()))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("q.deferred.quorum.1", true, "empty"),
                ("q.deferred.quorum.2", false, "3 job(s) waiting"),
                (
                    "q.deferred.quorum.3",
                    false,
                    "2 job(s) past their delay, not moved back yet"
                ),
                ("q.deferred.quorum.4", false, "no statistics yet"),
                ("q.deferred.quorum.5", false, "1 consumer(s)"),
            ]
        );
    }
}
