//! What a cluster failover run measured, its verdict, and its
//! RELIABILITY.md row.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::cluster::Placement;
use super::failover::Failover;
use super::ledger::Check;

/// What a failover run measured.
#[derive(Debug, Clone)]
pub(crate) struct FailoverReport {
    pub(crate) jobs: u32,
    /// Every `held_every`-th job failed its first attempt.
    pub(crate) held_every: u32,
    /// The index of the killed node.
    pub(crate) killed: usize,
    /// The index of the node every queue was declared through.
    pub(crate) leaders_on: usize,
    /// The hold queue declared for the run's retries.
    pub(crate) hold: String,
    pub(crate) check: Check,
    /// First attempts that failed on purpose (each sent its job to a hold;
    /// a redelivered first attempt fails again and counts again).
    pub(crate) first_attempts_failed: u64,
    /// Failed `enqueue` calls (each retried), by error kind.
    pub(crate) producer_errors: BTreeMap<String, u64>,
    pub(crate) failover: Failover,
    /// Leaders and members at the end, with every node back.
    pub(crate) end: BTreeMap<String, Placement>,
    /// Confirmed jobs not yet handled when the killed node was restarted.
    pub(crate) waiting_at_restart: Vec<u32>,
    /// Messages in each queue when the killed node was restarted.
    pub(crate) left_at_restart: BTreeMap<String, u64>,
    pub(crate) restart_took: Duration,
    /// Confirmed jobs still not handled [`release_window`] after the
    /// restart.
    ///
    /// [`release_window`]: super::failover::FailoverPlan::release_window
    pub(crate) stalled_after_restart: Vec<u32>,
    /// Holds whose leader was restarted to release them, with the node
    /// that led each.
    pub(crate) remedied: Vec<(String, usize)>,
    /// From the restart until every job was handled and every queue empty.
    pub(crate) drained_in: Duration,
    /// A worker that stopped before it was asked to.
    pub(crate) worker_exit: Option<String>,
    /// What `Worker::run` returned after the shutdown.
    pub(crate) worker_result: String,
    pub(crate) settle_failures: u64,
    /// Messages left in each queue at the end.
    pub(crate) left: BTreeMap<String, u64>,
    /// The run's work queue (`q`).
    pub(crate) queue: String,
    pub(crate) timed_out: bool,
    /// From the start until every job was confirmed and the failover seen.
    pub(crate) produced_in: Duration,
    pub(crate) elapsed: Duration,
}

impl FailoverReport {
    /// Jobs waiting when the killed node was restarted that had gone
    /// through a hold, and those that had not.
    pub(crate) fn waiting_split(&self) -> (usize, usize) {
        self.split(&self.waiting_at_restart)
    }

    /// Of `jobs`, those that had gone through a hold, and the others.
    fn split(&self, jobs: &[u32]) -> (usize, usize) {
        let held = jobs
            .iter()
            .filter(|&&n| n.is_multiple_of(self.held_every))
            .count();
        (held, jobs.len() - held)
    }

    /// "no" or how many jobs a hold leader's restart released.
    fn remedy(&self) -> String {
        if self.remedied.is_empty() {
            "no".to_owned()
        } else {
            format!(
                "hold leader restarted ({} jobs waiting)",
                self.stalled_after_restart.len()
            )
        }
    }

    /// Messages still in the holds at the end: jobs stranded by a stalled
    /// dead-letter worker (RabbitMQ 3.10.8), kept by the broker but never
    /// released.
    pub(crate) fn stranded(&self) -> u64 {
        let dead = format!("{}.dead", self.queue);
        self.left
            .iter()
            .filter(|(name, _)| **name != self.queue && **name != dead)
            .map(|(_, &m)| m)
            .sum()
    }

    /// Confirmed jobs never handled and not accounted for by the holds'
    /// message counts: a direct job never handled, or more held jobs
    /// missing than the holds keep.
    pub(crate) fn unaccounted(&self) -> usize {
        let (held, direct) = self.split(&self.check.lost);
        let stranded = usize::try_from(self.stranded()).unwrap_or(usize::MAX);
        direct + held.saturating_sub(stranded)
    }

    /// The CI promise, when the killed node was the clients' node but led
    /// no queue: every confirmed job handled, direct and held alike (no
    /// job may wait in a hold, no hold leader restarted), and everything
    /// [`Self::assert_nothing_unaccounted`] checks.
    pub(crate) fn assert_nothing_lost(&self) {
        assert_ne!(
            self.leaders_on, self.killed,
            "the strict check is for a run whose killed node leads no queue: {self}"
        );
        assert!(
            self.failover
                .before
                .values()
                .all(|p| p.leader == Some(self.leaders_on)),
            "a queue was not led by n{} before the kill: {self}",
            self.leaders_on + 1
        );
        assert!(
            self.failover.before.contains_key(&self.hold),
            "the run's hold `{}` was not listed before the kill: {self}",
            self.hold
        );
        assert!(!self.timed_out, "the run hit its deadline: {self}");
        assert!(
            self.check.lost.is_empty(),
            "confirmed jobs were lost: {self}"
        );
        assert_eq!(self.stranded(), 0, "jobs stayed in a hold: {self}");
        assert!(
            self.remedied.is_empty(),
            "a hold's leader had to be restarted to release it: {self}"
        );
        self.assert_nothing_unaccounted();
    }

    /// The leader-kill promise (the killed node led every queue): every
    /// confirmed job handled or still kept by the broker in a hold (jobs
    /// stranded there by the broker's stalled dead-letter worker, RabbitMQ
    /// 3.10.8, are reported, not called lost), nothing unknown, both
    /// clients carried on through another node without a restart, and the
    /// work and dead-letter queues empty at the end.
    pub(crate) fn assert_nothing_unaccounted(&self) {
        assert!(!self.timed_out, "the run hit its deadline: {self}");
        assert_eq!(self.unaccounted(), 0, "confirmed jobs were lost: {self}");
        if self.stranded() > 0 {
            eprintln!(
                "WARNING: {} jobs stayed stranded in a quorum hold (RabbitMQ 3.10.8 \
                 dead-letter stall; kept by the broker, never released within the run)",
                self.stranded()
            );
        }
        assert!(
            self.check.unexpected.is_empty(),
            "unknown jobs were handled: {self}"
        );
        assert_eq!(
            self.check.confirmed, self.jobs as usize,
            "not every job was confirmed: {self}"
        );
        assert!(
            self.first_attempts_failed > 0,
            "no job went through a hold: {self}"
        );
        assert!(
            self.failover.problems.is_empty(),
            "the failover was not seen through: {self}"
        );
        assert!(
            self.failover
                .connections_before
                .values()
                .all(|&node| node == self.killed)
                && self.failover.connections_before.len() == 2,
            "the clients were not both on the killed node before the kill: {self}"
        );
        assert!(
            self.failover.reconnected_in.is_some(),
            "the clients did not both reconnect to another node: {self}"
        );
        assert!(
            self.failover.after.is_some(),
            "the queues did not all get a new leader: {self}"
        );
        assert!(
            self.worker_exit.is_none(),
            "the worker stopped by itself: {self}"
        );
        assert_eq!(
            self.worker_result, "Ok",
            "Worker::run failed after the shutdown: {self}"
        );
        let dead = format!("{}.dead", self.queue);
        assert!(
            self.left.get(&self.queue) == Some(&0) && self.left.get(&dead) == Some(&0),
            "messages were left in the work or dead-letter queue: {self}"
        );
    }

    /// A row of the RELIABILITY.md table.
    pub(crate) fn row(&self) -> String {
        let (held, direct) = self.waiting_split();
        format!(
            "| {} | {} | {} | {} | {} ({} extra runs) | {held} held + {direct} direct | {} | {} | {:.1} s |",
            self.jobs,
            self.first_attempts_failed,
            self.unaccounted(),
            self.stranded(),
            self.check.duplicated,
            self.check.extra_runs,
            self.failover.reconnected_in.map_or_else(
                || "never".to_owned(),
                |d| format!("{:.1} s", d.as_secs_f64())
            ),
            self.remedy(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// `q: leader n1, online 3/3; q.dead: …`
fn placements(map: &BTreeMap<String, Placement>, queue_prefix_len: usize) -> String {
    map.iter()
        .map(|(name, p)| format!("{}: {p}", short(name, queue_prefix_len)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A queue's name without the run's unique work-queue name (`q`, `q.dead`,
/// `q.deferred.quorum.500`).
fn short(name: &str, prefix_len: usize) -> String {
    format!("q{}", name.get(prefix_len..).unwrap_or(name))
}

impl fmt::Display for FailoverReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The work queue is the shortest name of the run.
        let prefix = self
            .end
            .keys()
            .chain(self.failover.before.keys())
            .map(String::len)
            .min()
            .unwrap_or(0);
        let nodes = |map: &BTreeMap<String, usize>| {
            map.values()
                .map(|i| format!("n{}", i + 1))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let depths = |map: &BTreeMap<String, u64>| {
            map.iter()
                .map(|(name, m)| format!("{} {m}", short(name, prefix)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (held, direct) = self.waiting_split();
        writeln!(
            f,
            "[cluster failover] {} jobs (1 in {} fails once: {} failed first attempts), queues \
             declared through n{}, n{} killed, {:.1} s in all ({:.1} s producing)",
            self.jobs,
            self.held_every,
            self.first_attempts_failed,
            self.leaders_on + 1,
            self.killed + 1,
            self.elapsed.as_secs_f64(),
            self.produced_in.as_secs_f64(),
        )?;
        writeln!(f, "  ledger: {}", self.check)?;
        writeln!(
            f,
            "  before the kill: {}; clients on {}",
            placements(&self.failover.before, prefix),
            nodes(&self.failover.connections_before)
        )?;
        writeln!(
            f,
            "  after the kill: {} (led again in {:?}); clients on {} (reconnected in {:?})",
            self.failover
                .after
                .as_ref()
                .map_or_else(|| "not led".to_owned(), |a| placements(a, prefix)),
            self.failover.led_in,
            nodes(&self.failover.connections_after),
            self.failover.reconnected_in,
        )?;
        writeln!(
            f,
            "  at the restart: {held} held + {direct} direct jobs still waiting; queues: {}; \
             restart took {:.1} s, drained {:.1} s after it",
            depths(&self.left_at_restart),
            self.restart_took.as_secs_f64(),
            self.drained_in.as_secs_f64(),
        )?;
        let (held_after, direct_after) = self.split(&self.stalled_after_restart);
        let remedied: Vec<String> = self
            .remedied
            .iter()
            .map(|(hold, leader)| format!("{} (led by n{})", short(hold, prefix), leader + 1))
            .collect();
        writeln!(
            f,
            "  after the restart: {held_after} held + {direct_after} direct jobs still waiting; \
             hold leaders restarted to release them: {remedied:?}"
        )?;
        writeln!(
            f,
            "  at the end: {}; left: {}; stranded in holds {}, unaccounted {}",
            placements(&self.end, prefix),
            depths(&self.left),
            self.stranded(),
            self.unaccounted()
        )?;
        write!(
            f,
            "  producer errors {:?}; settle failures {}; worker exit {:?}; worker result {}; \
             problems {:?}; timed out {}",
            self.producer_errors,
            self.settle_failures,
            self.worker_exit,
            self.worker_result,
            self.failover.problems,
            self.timed_out
        )
    }
}
