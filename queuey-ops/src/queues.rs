//! The work queues of a vhost at a glance, from one management listing: a
//! work queue exists with its dead-letter queue (shards counted with it).
//! The fleet's are those its workers consume, or all when none is heard
//! from ([`choose`]). Counts are statistics and can lag a few seconds.

use std::collections::BTreeSet;

use queuey_core::control::Heartbeat;
use serde::Serialize;

use crate::mgmt::QueueInfo;
use crate::shards::{self, Shards};
use crate::{OpsError, Result};
use queuey_core::control::ControlState;

/// One work queue's counts, summed over its lane and shards (`None`: no
/// statistics yet), and whether the fleet has it paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct QueueLine {
    pub(crate) queue: String,
    pub(crate) shards: u16,
    pub(crate) ready: Option<u64>,
    pub(crate) unacked: Option<u64>,
    pub(crate) consumers: Option<u64>,
    pub(crate) paused: bool,
    pub(crate) dead: Option<u64>,
}

/// The work queues among `infos`, shards left out, in the listing's order.
pub(crate) fn work_queues(infos: &[QueueInfo], dead_suffix: &str) -> Vec<String> {
    let exists = |name: &str| infos.iter().any(|i| i.name == name);
    infos
        .iter()
        .filter_map(|i| i.name.strip_suffix(dead_suffix))
        .filter(|queue| {
            crate::dead_queue_of(queue, dead_suffix)
                .is_ok_and(|dq| dq != *queue && exists(queue) && exists(&dq))
                && !shards::is_listed_shard(queue, exists)
        })
        .map(str::to_owned)
        .collect()
}

/// The rule that chose the queues listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The queues an operator gave (the dashboard's `--queue`).
    AllowList,
    /// The queues the fleet's `workers` consume; `unlisted`: those that
    /// are no work queue.
    Fleet {
        workers: usize,
        unlisted: Vec<String>,
    },
    /// No worker heard from recently: every work queue.
    NoWorkerHeard,
    /// Every work queue, as asked.
    Everything,
}

/// The queues to list among `every`, and the rule that chose them.
pub(crate) fn choose(
    allow_list: bool,
    every: Vec<String>,
    workers: &[Heartbeat],
    all: bool,
) -> (Vec<String>, Rule) {
    if allow_list {
        return (every, Rule::AllowList);
    }
    if all {
        return (every, Rule::Everything);
    }
    if workers.is_empty() {
        return (every, Rule::NoWorkerHeard);
    }
    let listed = |name: &str| every.iter().any(|q| q == name);
    let mut found = BTreeSet::new();
    let mut unlisted = BTreeSet::new();
    for name in workers.iter().flat_map(|w| &w.queues) {
        let lane = shards::parse_shard_name(name).map(|(lane, _)| lane);
        match lane.filter(|lane| !listed(name) && listed(lane)) {
            Some(lane) => found.insert(lane),
            None if listed(name) => found.insert(name.as_str()),
            None => unlisted.insert(name.as_str()),
        };
    }
    let rule = Rule::Fleet {
        workers: workers.len(),
        unlisted: unlisted.into_iter().map(str::to_owned).collect(),
    };
    let queues = every
        .iter()
        .filter(|q| found.contains(q.as_str()))
        .cloned()
        .collect();
    (queues, rule)
}

/// The line of each of `queues` (a dead-letter queue's name stands for its
/// work queue) from `infos`.
pub(crate) fn lines(
    infos: &[QueueInfo],
    queues: &[String],
    dead_suffix: &str,
    state: &ControlState,
) -> Result<Vec<QueueLine>> {
    let by_name = |name: &str| infos.iter().find(|i| i.name == name);
    let mut lines = Vec::new();
    for named in queues {
        let queue = crate::work_queue_of(named, dead_suffix)?;
        if by_name(&queue).is_none() {
            return Err(OpsError::UnknownQueue(queue));
        }
        let shards = shards::in_listing(&queue, |name| by_name(name).is_some());
        lines.push(line(&shards, dead_suffix, state, by_name)?);
    }
    Ok(lines)
}

/// The line of `shards`, its counts looked up with `by_name`.
pub(crate) fn line<'a>(
    shards: &Shards,
    dead_suffix: &str,
    state: &ControlState,
    by_name: impl Fn(&str) -> Option<&'a QueueInfo>,
) -> Result<QueueLine> {
    let members = shards.members();
    let work: Vec<&QueueInfo> = members.iter().filter_map(|m| by_name(&m.queue)).collect();
    let mut dead = Vec::new();
    for member in &members {
        if let Some(info) = by_name(&crate::dead_queue_of(&member.queue, dead_suffix)?) {
            dead.push(info);
        }
    }
    let sum = |infos: &[&QueueInfo], count: fn(&QueueInfo) -> Option<u64>| {
        infos
            .iter()
            .filter_map(|i| count(i))
            .reduce(u64::saturating_add)
    };
    Ok(QueueLine {
        queue: shards.queue.clone(),
        shards: shards.count,
        ready: sum(&work, |i| i.messages_ready),
        unacked: sum(&work, |i| i.messages_unacknowledged),
        consumers: sum(&work, |i| i.consumers),
        paused: state.is_paused(&shards.queue),
        dead: sum(&dead, |i| i.messages),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, ready: u64, unacked: u64, consumers: u64) -> QueueInfo {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "messages": ready + unacked,
            "messages_ready": ready,
            "messages_unacknowledged": unacked,
            "consumers": consumers,
        }))
        .unwrap()
    }

    fn listing() -> Vec<QueueInfo> {
        vec![
            info("a", 3, 1, 2),
            info("a.dead", 5, 0, 0),
            info("a.deferred.quorum.1000", 7, 0, 0),
            info("b", 1, 0, 0),
            info("c.dead", 1, 0, 0),
            info("s", 1, 0, 1),
            info("s.dead", 1, 0, 0),
            info("s.s0", 2, 1, 1),
            info("s.s0.dead", 4, 0, 0),
            info("s.s1", 3, 0, 1),
            info("s.s1.dead", 0, 0, 0),
        ]
    }

    #[test]
    fn the_work_queues_are_those_with_a_dead_letter_queue_and_no_shard_alone() {
        assert_eq!(work_queues(&listing(), ".dead"), ["a", "s"]);
        assert!(work_queues(&listing(), ".other").is_empty());
    }

    #[test]
    fn a_sharded_queue_is_one_line_summed_over_its_lane_and_shards() {
        let mut state = ControlState::default();
        let pause = queuey_core::control::Command::Pause { queue: "s".into() };
        state.apply(&queuey_core::control::ControlRecord::new(pause));
        let queues = ["a".to_owned(), "s.dead".to_owned()];
        let lines = lines(&listing(), &queues, ".dead", &state).unwrap();
        assert_eq!(
            lines[0],
            QueueLine {
                queue: "a".into(),
                shards: 0,
                ready: Some(3),
                unacked: Some(1),
                consumers: Some(2),
                paused: false,
                dead: Some(5),
            }
        );
        assert_eq!(
            lines[1],
            QueueLine {
                queue: "s".into(),
                shards: 2,
                ready: Some(6),
                unacked: Some(1),
                consumers: Some(3),
                paused: true,
                dead: Some(5),
            }
        );
        let err = super::lines(&listing(), &["nope".into()], ".dead", &state).unwrap_err();
        assert!(matches!(err, OpsError::UnknownQueue(q) if q == "nope"));
    }

    fn worker(queues: &[&str]) -> Heartbeat {
        Heartbeat {
            worker_id: queuey_core::Uuid::new_v4(),
            host: "host".into(),
            name: None,
            pid: 1,
            version: "0".into(),
            queues: queues.iter().map(|q| (*q).to_owned()).collect(),
            paused: vec![],
            concurrency: 1,
            connection: "connected".into(),
            started_at_ms: 0,
            at_ms: 0,
            interval_ms: 20_000,
            stopping: false,
            running: vec![],
            totals: vec![],
            limits: vec![],
        }
    }

    #[test]
    fn the_fleets_queues_are_those_its_workers_consume_else_every_one() {
        let every = || vec!["a".to_owned(), "b".into(), "s".into()];
        let workers = [worker(&["s.s1", "a", "theirs"]), worker(&["a"])];
        let (queues, rule) = choose(false, every(), &workers, false);
        assert_eq!(queues, ["a", "s"]);
        let unlisted = vec!["theirs".to_owned()];
        assert_eq!(
            rule,
            Rule::Fleet {
                workers: 2,
                unlisted
            }
        );
        assert_eq!(
            choose(false, every(), &[], false),
            (every(), Rule::NoWorkerHeard)
        );
        assert_eq!(
            choose(false, every(), &workers, true),
            (every(), Rule::Everything)
        );
    }

    #[test]
    fn a_queue_without_statistics_yet_has_no_counts() {
        let fresh: QueueInfo = serde_json::from_value(serde_json::json!({"name": "f"})).unwrap();
        let lines = lines(&[fresh], &["f".into()], ".dead", &ControlState::default()).unwrap();
        assert_eq!((lines[0].ready, lines[0].dead), (None, None));
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|q| (*q).to_owned()).collect()
    }

    /// `choose`'s answer with named fields, for the assertions.
    struct Chosen {
        queues: Vec<String>,
        rule: Rule,
    }

    impl Chosen {
        fn of(allow_list: bool, every: Vec<String>, workers: &[Heartbeat], all: bool) -> Self {
            let (queues, rule) = choose(allow_list, every, workers, all);
            Chosen { queues, rule }
        }
    }

    #[test]
    fn the_fleets_queues_are_listed_in_order_with_shards_under_their_queue() {
        let every = names(&["a", "b", "c", "d"]);
        let workers = [
            worker(&["c", "a", "nodead"]),
            worker(&["d.s0", "d.s1", "a"]),
        ];
        let chosen = Chosen::of(false, every, &workers, false);
        assert_eq!(chosen.queues, names(&["a", "c", "d"]));
        assert_eq!(
            chosen.rule,
            Rule::Fleet {
                workers: 2,
                unlisted: names(&["nodead"]),
            }
        );
    }

    #[test]
    fn a_queue_named_like_a_shard_is_listed_as_itself() {
        let every = names(&["jobs", "jobs.s1"]);
        let chosen = Chosen::of(false, every, &[worker(&["jobs.s1"])], false);
        assert_eq!(chosen.queues, names(&["jobs.s1"]));
    }

    #[test]
    fn with_no_worker_heard_or_when_asked_every_queue_is_listed() {
        let every = names(&["a", "b"]);
        let heard = [worker(&["a"])];
        let none = Chosen::of(false, every.clone(), &[], false);
        assert_eq!(
            (none.queues, none.rule),
            (every.clone(), Rule::NoWorkerHeard)
        );
        let asked = Chosen::of(false, every.clone(), &heard, true);
        assert_eq!((asked.queues, asked.rule), (every, Rule::Everything));
    }

    #[test]
    fn the_allow_list_is_listed_whatever_the_fleet_consumes_or_the_page_asks() {
        let listed = names(&["mine"]);
        for all in [false, true] {
            let chosen = Chosen::of(true, listed.clone(), &[worker(&["theirs"])], all);
            assert_eq!(
                (chosen.queues, chosen.rule),
                (listed.clone(), Rule::AllowList)
            );
        }
    }
}
