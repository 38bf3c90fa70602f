//! The hold census: for each hold queue of a work queue (a sharded queue's
//! lane and every shard), its delay, jobs waiting, consumers (must be 0: a
//! consumer steals delayed jobs), lease left and when its jobs come back.
//!
//! Holds are listed by the management API; counts come from a passive
//! declare (exact). Release times are the `queuey-due-at` headers read from
//! the head of each classic hold and handed back in order; reading renews
//! its lease and can only delay a job by milliseconds. Quorum holds are
//! never read (a handed-back message counts as a delivery on RabbitMQ 4):
//! every job waiting leaves within the delay from now, which bounds the
//! latest release ([`HoldQueue::releases_by_ms`]).

use std::time::Duration;

use queuey_rabbitmq::HoldQueues;
use queuey_rabbitmq::topology::ArgumentValue;
use serde::Serialize;

use crate::amqp::Amqp;
use crate::argument;
use crate::browse::browse_counted;
use crate::error::Result;
use crate::headers;
use crate::mgmt::{Management, QueueInfo};
use crate::shards::{Member, Shards};
use crate::time::{now_ms, parse_ms};

/// One hold queue in the census.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HoldQueue {
    pub(crate) name: String,
    /// The work queue (or shard) its jobs go back to.
    pub(crate) work_queue: String,
    /// Its shard; `None` for the lane and an unsharded queue.
    pub(crate) shard: Option<u16>,
    /// `quorum` (durable, never expires) or `classic` (with a lease).
    pub(crate) kind: &'static str,
    /// Its delay (the TTL in its name).
    pub(crate) delay_ms: u64,
    /// Jobs waiting (passive declare; for a quorum hold, those whose delay
    /// is not over).
    pub(crate) jobs: u64,
    /// Quorum holds only: jobs past their delay the broker has not moved
    /// back yet (management statistics; `None` before the first emission).
    /// A figure that stays up means the hold stopped releasing.
    pub(crate) releasing: Option<u64>,
    /// Consumers attached (must be 0).
    pub(crate) consumers: u64,
    /// Effective `x-expires` (the smaller of the argument and any policy).
    pub(crate) expires_ms: Option<i64>,
    /// Effective TTL (the smaller of the argument and any policy).
    pub(crate) message_ttl_ms: Option<i64>,
    /// Lease left before this census renewed it, `x-expires − (now −
    /// idle_since)`, an upper bound; `None` while the queue is in use.
    pub(crate) lease_left_ms: Option<i64>,
    /// Due time of the first job waiting, when it carries `queuey-due-at`.
    pub(crate) earliest_release_ms: Option<i64>,
    /// Due time of the last job waiting, when every job was read.
    pub(crate) latest_release_ms: Option<i64>,
    /// Jobs read for the release times.
    pub(crate) jobs_read: u64,
    /// Now plus its delay: when every job waiting has left at the latest
    /// (`None` when empty). A bound; a stalled quorum hold keeps jobs past it.
    pub(crate) releases_by_ms: Option<i64>,
    /// Why the release times are not all read, when they are not.
    pub(crate) release_note: Option<String>,
    /// The policy and operator policy applied, if any.
    pub(crate) policies: Vec<String>,
    /// What differs from the hold queuey declares, when only the name is a
    /// hold's ([`hold_mismatch`]); `holds prune` never deletes such a queue.
    pub(crate) mismatch: Option<String>,
    /// Quorum holds only: released none of its jobs past their delay
    /// between two reads [`STALL_RECHECK`] apart.
    pub(crate) stalled: bool,
}

/// Every hold queue of one work queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Census {
    /// The work queue (the lane of a sharded queue).
    pub(crate) queue: String,
    /// How many shards it has (0: not sharded).
    pub(crate) shards: u16,
    /// Its hold queues, the lane's first, then each shard's, by delay.
    pub(crate) holds: Vec<HoldQueue>,
}

impl Census {
    /// Jobs in all hold queues, those past their delay included.
    pub(crate) fn total_jobs(&self) -> u64 {
        self.holds
            .iter()
            .map(|h| h.jobs.saturating_add(h.releasing.unwrap_or(0)))
            .fold(0, u64::saturating_add)
    }
}

/// A management API regex for `queue`'s holds of both families (and with
/// `sharded` its shards', `.s{digits}` after the name).
pub(crate) fn hold_pattern(queue: &str, deferred_suffix: &str, sharded: bool) -> String {
    let shards = if sharded { "(\\.s[0-9]+)?" } else { "" };
    format!(
        "^{}{shards}{}(\\.quorum)?\\.[0-9]+$",
        regex_escape(queue),
        regex_escape(deferred_suffix)
    )
}

/// The family and delay of a hold queue's name, if it is one of `queue`'s.
pub(crate) fn hold_kind(
    name: &str,
    queue: &str,
    deferred_suffix: &str,
) -> Option<(HoldQueues, u64)> {
    [HoldQueues::Quorum, HoldQueues::Classic]
        .into_iter()
        .find_map(|family| Some((family, family.parse(queue, deferred_suffix, name)?)))
}

/// The delay in a hold queue's name, if it is one of `queue`'s.
pub(crate) fn hold_delay(name: &str, queue: &str, deferred_suffix: &str) -> Option<u64> {
    hold_kind(name, queue, deferred_suffix).map(|(_, delay)| delay)
}

/// The arguments that make a queue named like a hold one of queuey's.
const HOLD_ARGUMENTS: [&str; 4] = [
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-dead-letter-strategy",
];

/// What makes `info` other than the hold of `family` for `delay_ms`
/// queuey declares for `work_queue` (type or arguments); `None` if it is one.
pub(crate) fn hold_mismatch(
    info: &QueueInfo,
    work_queue: &str,
    family: HoldQueues,
    delay_ms: u64,
) -> Option<String> {
    let expected = family.arguments(work_queue, delay_ms);
    let mut diffs = Vec::new();
    let wanted_type = match expected.get("x-queue-type") {
        Some(ArgumentValue::Text(t)) => t.as_str(),
        _ => "classic",
    };
    let queue_type = info.queue_type.as_deref().unwrap_or("classic");
    if queue_type != wanted_type {
        diffs.push(format!("a {queue_type} queue, not {wanted_type}"));
    }
    for key in HOLD_ARGUMENTS {
        let Some(value) = expected.get(key) else {
            continue;
        };
        let found = info.arguments.get(key);
        if !argument::matches(key, value, found) {
            let shown = found.map_or("absent".to_owned(), serde_json::Value::to_string);
            diffs.push(format!("{key} is {shown}, not {}", argument::show(value)));
        }
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

/// The effective value of a limit set both as an argument and by policy:
/// the broker applies the smaller.
pub(crate) fn effective(info: &QueueInfo, argument: &str, policy_key: &str) -> Option<i64> {
    let policy = info.policy_keys().get(policy_key).and_then(|v| v.as_i64());
    info.int_argument(argument).into_iter().chain(policy).min()
}

/// The wait before reading again quorum holds with jobs past their delay:
/// over twice the broker's statistics interval (5 s), for new figures.
pub(crate) const STALL_RECHECK: Duration = Duration::from_secs(12);

/// What an operator does about a quorum hold that stopped releasing.
pub(crate) const REMEDY: &str = "restart the hold's Raft member on the node that leads it \
     (`rabbitmq-queues quorum_status HOLD` names the leader; then `rabbitmqctl -n LEADER eval` \
     with `ra:stop_server(quorum_queues, ServerId)` and `ra:restart_server(quorum_queues, \
     ServerId)`), or move its leader to another node; its jobs are kept, not lost, and come \
     back once it releases. RabbitMQ 3.10.20, 3.11.12 and later fix the cause";

/// A quorum hold that released none of its jobs past their delay between
/// two reads `seconds` apart; `jobs`: those still there at the second.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Stall {
    pub(crate) hold: String,
    pub(crate) work_queue: String,
    pub(crate) jobs: u64,
    pub(crate) seconds: u64,
}

impl Stall {
    /// What is wrong and what to do, on one line.
    pub(crate) fn describe(&self) -> String {
        format!(
            "quorum hold `{}` of queue `{}` holds {} job(s) past their delay and released none \
             in {} s: its dead-letter worker has stopped. To release them, {REMEDY}",
            self.hold, self.work_queue, self.jobs, self.seconds
        )
    }
}

/// Whether a quorum hold read as `earlier` then `later` released none of
/// the jobs past their delay at the first read: its figure did not fall,
/// and (where publishes are counted) fewer jobs left than were due then.
pub(crate) fn released_nothing(earlier: &QueueInfo, later: &QueueInfo) -> bool {
    let (Some(before), Some(after)) = (earlier.releasing(), later.releasing()) else {
        return false;
    };
    if before == 0 || after == 0 || after < before {
        return false;
    }
    match (
        earlier.count("publish"),
        later.count("publish"),
        earlier.messages,
        later.messages,
    ) {
        (Some(published_then), Some(published_now), Some(held_then), Some(held_now)) => {
            let left = i128::from(published_now) - i128::from(published_then)
                + i128::from(held_then)
                - i128::from(held_now);
            left < i128::from(before)
        }
        _ => true,
    }
}

/// The quorum holds among `holds` (hold, work queue) that released none of
/// their jobs past their delay in [`STALL_RECHECK`] (waits only if one has such jobs).
pub(crate) async fn stalled(mgmt: &Management, holds: &[(String, String)]) -> Result<Vec<Stall>> {
    let mut due = Vec::new();
    for (hold, work_queue) in holds {
        if let Some(info) = mgmt.queue(hold).await?
            && info.releasing().unwrap_or(0) > 0
        {
            due.push((info, work_queue));
        }
    }
    if due.is_empty() {
        return Ok(Vec::new());
    }
    tokio::time::sleep(STALL_RECHECK).await;
    let mut out = Vec::new();
    for (earlier, work_queue) in due {
        if let Some(later) = mgmt.queue(&earlier.name).await?
            && released_nothing(&earlier, &later)
        {
            out.push(Stall {
                hold: earlier.name.clone(),
                work_queue: work_queue.clone(),
                jobs: later.releasing().unwrap_or(0),
                seconds: STALL_RECHECK.as_secs(),
            });
        }
    }
    Ok(out)
}

/// The work queue and delay of a quorum hold's name, when it is one:
/// `{queue}{deferred_suffix}.quorum.{ttl_ms}`.
pub(crate) fn quorum_hold_of<'a>(name: &'a str, deferred_suffix: &str) -> Option<(&'a str, u64)> {
    let at = name.rfind(&format!("{deferred_suffix}.quorum."))?;
    let queue = &name[..at];
    Some((
        queue,
        HoldQueues::Quorum.parse(queue, deferred_suffix, name)?,
    ))
}

/// The census of `shards`' hold queues, reading at most `peek` jobs of each.
pub(crate) async fn census_of(
    mgmt: &Management,
    amqp: &Amqp,
    shards: &Shards,
    deferred_suffix: &str,
    peek: usize,
) -> Result<Census> {
    let mut holds = Vec::new();
    for listed in listed_holds(mgmt, shards, deferred_suffix).await? {
        holds.extend(read_hold(amqp, &listed, peek).await?);
    }
    holds.sort_by_key(|h| (h.shard, h.delay_ms, h.kind));
    Ok(Census {
        queue: shards.queue.clone(),
        shards: shards.count,
        holds,
    })
}

/// A hold queue as the management API lists it, with the member it
/// releases into.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) info: QueueInfo,
    pub(crate) member: Member,
    pub(crate) family: HoldQueues,
    pub(crate) delay_ms: u64,
}

/// The hold queues of `shards`' queues, in the management API's order.
pub(crate) async fn listed_holds(
    mgmt: &Management,
    shards: &Shards,
    deferred_suffix: &str,
) -> Result<Vec<Listed>> {
    let pattern = hold_pattern(&shards.queue, deferred_suffix, shards.is_sharded());
    let members = shards.members();
    let infos = mgmt.queues(Some(&pattern)).await?;
    Ok(infos
        .into_iter()
        .filter_map(|info| {
            let (member, family, delay_ms) = members.iter().find_map(|m| {
                hold_kind(&info.name, &m.queue, deferred_suffix).map(|(f, d)| (m.clone(), f, d))
            })?;
            Some(Listed {
                info,
                member,
                family,
                delay_ms,
            })
        })
        .collect())
}

/// One hold in the census; `None` when it expired since.
async fn read_hold(amqp: &Amqp, listed: &Listed, peek: usize) -> Result<Option<HoldQueue>> {
    let Listed {
        info,
        member,
        family,
        delay_ms,
    } = listed;
    let (family, delay_ms) = (*family, *delay_ms);
    let quorum = family == HoldQueues::Quorum;
    let mismatch = hold_mismatch(info, &member.queue, family, delay_ms);
    let expires_ms = effective(info, "x-expires", "expires");
    let lease_left_ms = match (expires_ms, info.idle_since.as_deref().and_then(parse_ms)) {
        (Some(expires), Some(idle)) => Some(expires - (now_ms() - idle)),
        _ => None,
    };
    let peek = if quorum { 0 } else { peek };
    let (held, counts) = match browse_counted(amqp, &info.name, Some(peek)).await {
        Ok(read) => read,
        // Expired between the listing and the read: it holds nothing.
        Err(crate::OpsError::UnknownQueue(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let dues: Vec<Option<i64>> = held
        .iter()
        .map(|h| headers::integer(h.properties.headers().as_ref(), headers::DUE_AT))
        .collect();
    let jobs = u64::from(counts.messages);
    let jobs_read = held.len() as u64;
    let all_read = jobs_read == jobs;
    let release_note = if jobs == 0 {
        None
    } else if quorum {
        Some(QUORUM_NOT_READ.to_owned())
    } else if !all_read {
        Some(format!(
            "read {jobs_read} of {jobs} jobs (--peek): the latest release is a bound"
        ))
    } else if dues.iter().any(Option::is_none) {
        Some(format!(
            "some jobs carry no `{}` header (not published by queuey)",
            headers::DUE_AT
        ))
    } else {
        None
    };
    let now = now_ms();
    Ok(Some(HoldQueue {
        name: info.name.clone(),
        work_queue: member.queue.clone(),
        shard: member.shard,
        kind: if quorum { "quorum" } else { "classic" },
        delay_ms,
        jobs,
        releasing: if quorum { info.releasing() } else { None },
        consumers: u64::from(counts.consumers),
        expires_ms,
        message_ttl_ms: effective(info, "x-message-ttl", "message-ttl"),
        lease_left_ms,
        earliest_release_ms: dues.first().copied().flatten(),
        latest_release_ms: dues.last().copied().flatten().filter(|_| all_read),
        jobs_read,
        releases_by_ms: (jobs > 0)
            .then(|| now.saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX))),
        release_note,
        policies: info
            .policy
            .iter()
            .chain(&info.operator_policy)
            .cloned()
            .collect(),
        mismatch,
        stalled: false,
    }))
}

/// Why a quorum hold's release times are not read.
pub(crate) const QUORUM_NOT_READ: &str = "a quorum hold is not read: a job handed back to a \
     quorum queue counts as a delivery (RabbitMQ 4 releases it early past its limit); every job \
     leaves within the delay from now (`queuey job show ID` reads one job's release time)";

impl HoldQueue {
    /// The earliest release as shown: the first due time, `due now`, or why
    /// it is not known.
    pub(crate) fn earliest_text(&self, now_ms: i64) -> String {
        match (self.earliest_release_ms, self.releasing) {
            (Some(ms), _) => crate::time::when(ms, now_ms),
            _ if self.jobs == 0 && self.releasing.unwrap_or(0) == 0 => "-".to_owned(),
            (None, Some(n)) if n > 0 => format!("due now ({n} past their delay)"),
            _ if self.kind == "quorum" => "not read (quorum)".to_owned(),
            _ => "unknown (no due-at header)".to_owned(),
        }
    }

    /// The latest release as shown: the last due time, else `by` the bound.
    pub(crate) fn latest_text(&self, now_ms: i64) -> String {
        match (self.latest_release_ms, self.releases_by_ms) {
            (Some(ms), _) => crate::time::when(ms, now_ms),
            (None, Some(by)) => format!("by {}", crate::time::when(by, now_ms)),
            (None, None) => "-".to_owned(),
        }
    }
}

/// A gauge: name, help text, value of one hold queue (if it has one).
type Gauge = (&'static str, &'static str, fn(&HoldQueue) -> Option<u64>);

/// Prometheus gauges of several censuses, labelled by work queue, kind,
/// delay and (for a shard's hold) `shard`.
pub(crate) fn prometheus(censuses: &[Census]) -> String {
    let mut out = String::new();
    let metrics: [Gauge; 3] = [
        (
            "queuey_hold_jobs",
            "Jobs waiting in a hold queue, by work queue and delay.",
            |h| Some(h.jobs),
        ),
        (
            "queuey_hold_consumers",
            "Consumers on a hold queue; anything but 0 steals delayed jobs.",
            |h| Some(h.consumers),
        ),
        (
            "queuey_hold_releasing",
            "Jobs of a quorum hold past their delay, waiting to be moved back; \
             a value that stays up means the hold stopped releasing.",
            |h| h.releasing,
        ),
    ];
    for (name, help, value) in metrics {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        for census in censuses {
            for h in &census.holds {
                let Some(value) = value(h) else { continue };
                let shard = h
                    .shard
                    .map_or(String::new(), |index| format!(",shard=\"{index}\""));
                out.push_str(&format!(
                    "{name}{{queue=\"{}\"{shard},kind=\"{}\",delay_ms=\"{}\"}} {value}\n",
                    label(&census.queue),
                    h.kind,
                    h.delay_ms,
                ));
            }
        }
    }
    out
}

/// `value` as a Prometheus label value.
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Escapes regex metacharacters (for the broker's PCRE-like matching).
pub(crate) fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_names_parse_and_match_only_their_queue() {
        assert_eq!(hold_delay("q.deferred.5000", "q", ".deferred"), Some(5000));
        assert_eq!(hold_delay("q.deferred.", "q", ".deferred"), None);
        assert_eq!(hold_delay("q.deferred.5s", "q", ".deferred"), None);
        assert_eq!(hold_delay("qq.deferred.5", "q", ".deferred"), None);
        assert_eq!(
            hold_kind("q.deferred.quorum.5000", "q", ".deferred"),
            Some((HoldQueues::Quorum, 5000))
        );
        assert_eq!(
            hold_kind("q.deferred.5000", "q", ".deferred"),
            Some((HoldQueues::Classic, 5000))
        );
        assert_eq!(hold_delay("q.deferred.quorum.", "q", ".deferred"), None);
        assert_eq!(
            hold_pattern("a.b", ".deferred", false),
            "^a\\.b\\.deferred(\\.quorum)?\\.[0-9]+$"
        );
        assert_eq!(
            hold_pattern("a.b", ".deferred", true),
            "^a\\.b(\\.s[0-9]+)?\\.deferred(\\.quorum)?\\.[0-9]+$"
        );
    }

    #[test]
    fn the_prometheus_output_is_one_gauge_per_delay() {
        let hold = |delay_ms, jobs| HoldQueue {
            name: format!("q.deferred.{delay_ms}"),
            work_queue: "q".into(),
            shard: None,
            kind: "classic",
            delay_ms,
            jobs,
            releasing: None,
            consumers: 0,
            expires_ms: None,
            message_ttl_ms: None,
            lease_left_ms: None,
            earliest_release_ms: None,
            latest_release_ms: None,
            jobs_read: 0,
            releases_by_ms: None,
            release_note: None,
            policies: vec![],
            mismatch: None,
            stalled: false,
        };
        let mut census = Census {
            queue: "q\"x".into(),
            shards: 0,
            holds: vec![hold(1000, 3), hold(60000, 0)],
        };
        let text = census.prometheus();
        assert!(text.contains("# TYPE queuey_hold_jobs gauge\n"));
        assert!(
            text.contains(
                "queuey_hold_jobs{queue=\"q\\\"x\",kind=\"classic\",delay_ms=\"1000\"} 3\n"
            )
        );
        assert!(text.contains(
            "queuey_hold_consumers{queue=\"q\\\"x\",kind=\"classic\",delay_ms=\"60000\"} 0\n"
        ));
        assert_eq!(census.total_jobs(), 3);
        // Classic holds have no releasing figure.
        assert!(!text.contains("queuey_hold_releasing{"));
        // A shard's hold is told apart from the lane's of the same delay.
        census.shards = 2;
        census.holds.push(HoldQueue {
            shard: Some(1),
            ..hold(1000, 4)
        });
        let text = census.prometheus();
        assert!(
            text.contains(
                "queuey_hold_jobs{queue=\"q\\\"x\",kind=\"classic\",delay_ms=\"1000\"} 3\n"
            )
        );
        assert!(text.contains(
            "queuey_hold_jobs{queue=\"q\\\"x\",shard=\"1\",kind=\"classic\",delay_ms=\"1000\"} 4\n"
        ));
    }

    /// A queue as the management API lists it.
    fn listed(name: &str, queue_type: &str, arguments: serde_json::Value) -> QueueInfo {
        serde_json::from_value(serde_json::json!({
            "name": name, "type": queue_type, "durable": true, "arguments": arguments
        }))
        .unwrap()
    }

    #[test]
    fn only_a_queue_declared_as_a_hold_is_one() {
        let hold = "q.deferred.quorum.5000";
        let quorum_args = serde_json::json!({
            "x-queue-type": "quorum",
            "x-message-ttl": 5000,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "q",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        });
        let real = listed(hold, "quorum", quorum_args.clone());
        assert_eq!(hold_mismatch(&real, "q", HoldQueues::Quorum, 5000), None);

        // The name alone: an empty classic queue.
        let classic = listed(hold, "classic", serde_json::json!({}));
        let why = hold_mismatch(&classic, "q", HoldQueues::Quorum, 5000).unwrap();
        assert!(why.starts_with("a classic queue, not quorum"), "{why}");
        assert!(
            why.contains("x-dead-letter-routing-key is absent, not \"q\""),
            "{why}"
        );

        // A quorum queue that releases somewhere else.
        let mut elsewhere = quorum_args.clone();
        elsewhere["x-dead-letter-routing-key"] = "other".into();
        let why = hold_mismatch(
            &listed(hold, "quorum", elsewhere),
            "q",
            HoldQueues::Quorum,
            5000,
        )
        .unwrap();
        assert_eq!(why, "x-dead-letter-routing-key is \"other\", not \"q\"");

        // At-most-once release, or another delay than its name's.
        let mut at_most_once = quorum_args.clone();
        at_most_once
            .as_object_mut()
            .unwrap()
            .remove("x-dead-letter-strategy");
        assert!(
            hold_mismatch(
                &listed(hold, "quorum", at_most_once),
                "q",
                HoldQueues::Quorum,
                5000
            )
            .is_some()
        );
        assert!(hold_mismatch(&real, "q", HoldQueues::Quorum, 6000).is_some());

        // A classic hold as the first version declared it.
        let classic_hold = listed(
            "q.deferred.5000",
            "classic",
            serde_json::json!({
                "x-message-ttl": 5000,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "q",
                "x-expires": 10000,
            }),
        );
        assert_eq!(
            hold_mismatch(&classic_hold, "q", HoldQueues::Classic, 5000),
            None
        );
    }

    #[test]
    fn a_quorum_hold_that_stopped_releasing_shows_its_jobs_as_releasing() {
        let info = |stats: serde_json::Value| -> QueueInfo {
            let mut queue = serde_json::json!({"name": "q.deferred.quorum.500"});
            queue
                .as_object_mut()
                .unwrap()
                .extend(stats.as_object().unwrap().clone());
            serde_json::from_value(queue).unwrap()
        };
        // As a stalled hold shows: counted by the broker, neither ready nor
        // delivered.
        let stalled = info(serde_json::json!({
            "messages": 1251, "messages_ready": 0, "messages_unacknowledged": 0
        }));
        assert_eq!(stalled.releasing(), Some(1251));
        let waiting = info(serde_json::json!({
            "messages": 40, "messages_ready": 38, "messages_unacknowledged": 0
        }));
        assert_eq!(waiting.releasing(), Some(2));
        // No statistics emitted yet: unknown, not zero.
        assert_eq!(info(serde_json::json!({})).releasing(), None);
    }

    fn stats(name: &str, messages: u64, ready: u64, published: Option<u64>) -> QueueInfo {
        let mut queue = serde_json::json!({
            "name": name, "messages": messages, "messages_ready": ready,
            "messages_unacknowledged": 0,
        });
        if let Some(published) = published {
            queue["message_stats"] = serde_json::json!({ "publish": published });
        }
        serde_json::from_value(queue).unwrap()
    }

    #[test]
    fn a_hold_that_released_nothing_between_two_reads_is_stalled() {
        let hold = "q.deferred.quorum.1000";
        // Jobs only arrive, none leaves: stalled.
        assert!(released_nothing(
            &stats(hold, 20, 0, Some(20)),
            &stats(hold, 25, 0, Some(25))
        ));
        // Without publish counts, a figure that does not fall is enough.
        assert!(released_nothing(
            &stats(hold, 20, 0, None),
            &stats(hold, 20, 0, None)
        ));
        // The figure fell, or is 0: released.
        assert!(!released_nothing(
            &stats(hold, 20, 0, Some(20)),
            &stats(hold, 12, 0, Some(20))
        ));
        assert!(!released_nothing(
            &stats(hold, 20, 20, Some(20)),
            &stats(hold, 5, 5, Some(25))
        ));
        // A steady flow: 3 due at each read, but 50 published and the
        // hold no fuller, so every job due at the first read has left.
        assert!(!released_nothing(
            &stats(hold, 40, 37, Some(100)),
            &stats(hold, 40, 37, Some(150))
        ));
        // No statistics at one read: nothing can be said.
        let bare: QueueInfo = serde_json::from_value(serde_json::json!({"name": hold})).unwrap();
        assert!(!released_nothing(&bare, &stats(hold, 5, 0, None)));
    }

    #[test]
    fn quorum_hold_names_lead_back_to_their_work_queue() {
        assert_eq!(
            quorum_hold_of("app.emails.deferred.quorum.5000", ".deferred"),
            Some(("app.emails", 5000))
        );
        assert_eq!(
            quorum_hold_of("a.deferred.quorum.5.deferred.quorum.1000", ".deferred"),
            Some(("a.deferred.quorum.5", 1000))
        );
        for not_a_quorum_hold in [
            "app.emails",
            "app.emails.deferred.5000",
            "app.emails.deferred.quorum.",
            "app.emails.deferred.quorum.5s",
            "app.emails.wait.quorum.5000",
        ] {
            assert_eq!(quorum_hold_of(not_a_quorum_hold, ".deferred"), None);
        }
    }

    #[test]
    fn a_stall_says_what_to_do() {
        let said = Stall {
            hold: "q.deferred.quorum.1000".into(),
            work_queue: "q".into(),
            jobs: 20,
            seconds: 12,
        }
        .describe();
        assert!(
            said.contains("20 job(s)") && said.contains("ra:restart_server"),
            "{said}"
        );
    }
}
