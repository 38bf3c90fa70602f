//! `queuey holds prune`: which hold queues it deletes, and the deletion.
//!
//! Only quorum holds (classic ones expire), only as queuey declares them (a
//! lookalike is kept), and only empty ones: no job waiting or past its
//! delay, no consumer. The deletion is the library's
//! [`RabbitMqBackend::prune_hold`](queuey_rabbitmq::RabbitMqBackend::prune_hold),
//! which watches each hold ten seconds and asks the management API for the
//! jobs AMQP does not count.

use futures::StreamExt;
use futures::future::BoxFuture;
use queuey_core::{BackendError, BackendErrorKind};
use queuey_rabbitmq::{HoldCensus, HoldPruned, HoldQueues, RabbitMqOptions};
use serde::Serialize;

use crate::holds::{Census, HoldQueue, hold_mismatch};
use crate::mgmt::{Management, QueueInfo};
use crate::tls::TlsFiles;

/// The start of a lookalike hold's [`PruneItem::reason`].
pub(crate) const LOOKALIKE: &str = "not a hold queuey declared";

/// How many holds are pruned at once (each takes ten seconds or more).
const PRUNED_AT_ONCE: usize = 8;

/// Every job of a hold queue by the management API (`messages` counts
/// those past their delay, AMQP does not); a queue that is no longer a
/// quorum hold queuey declared fails the count, so it is kept.
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

/// Why `info` is not a quorum hold of its dead-letter routing key's queue.
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

/// One hold queue of a work queue (or shard), whether it is pruned, and
/// why it is kept (`empty` for a candidate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PruneItem {
    pub(crate) queue: String,
    pub(crate) hold: String,
    pub(crate) delay_ms: u64,
    pub(crate) prune: bool,
    pub(crate) reason: String,
}

/// The quorum holds of `census`, each with whether it is pruned.
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

/// Prunes the candidates of `items` through a backend of its own; returns
/// each with its outcome, in order.
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
