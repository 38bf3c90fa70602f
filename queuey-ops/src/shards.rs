//! The broker queues one queue name stands for: a sharded queue's lane and
//! its shards.
//!
//! A queue declared with
//! [`QueueConfig::shards`](queuey_core::QueueConfig::shards) is several
//! broker queues: the queue itself, the *lane*, and its shards `NAME.s0` …
//! `NAME.s{N-1}` (see [`queuey_core::shard`]), each with its own dead-letter
//! queue, suspect queue and hold queues. The tools treat them as one queue:
//! naming `emails` covers the lane and every shard, and what they list says
//! which shard each item is on; naming one shard, `emails.s2`, covers that
//! shard alone (it has no shards of its own).
//!
//! # How shards are found
//!
//! [`discover`] asks the broker over AMQP: a passive declare of `NAME.s0`,
//! `NAME.s1`, … until the first one that does not exist, at most
//! [`MAX_SHARDS`]. Each probe runs on a throwaway channel (a passive
//! declare of a missing queue closes the channel it is made on), and
//! [`PROBES_AT_ONCE`] of them run at a time. An unsharded queue costs one
//! probe.
//!
//! AMQP rather than the management API's queue list, so that every command
//! finds the same shards the same way: the dead-letter commands work
//! without the management plugin, and a passive declare is exact. Where a
//! listing of the broker's queues is at hand anyway (the dashboard's
//! index and `/metrics`), [`in_listing`] applies the same rule to it.
//!
//! Shards are numbered without gaps, so the search stops at the first
//! missing one: a shard deleted by hand hides those after it. `queuey
//! topology verify` with the queue's shard count reports such a missing
//! shard, and a shard beyond the count.

use serde::Serialize;

use crate::amqp::Amqp;
use crate::error::Result;

pub(crate) use queuey_core::shard::{MAX_SHARDS, parse_shard_name, shard_name};

/// Probes [`discover`] has in flight at once.
pub(crate) const PROBES_AT_ONCE: usize = 16;

/// The longest queue name AMQP allows, in bytes: a shard whose name would
/// be longer cannot exist.
const MAX_NAME_BYTES: usize = 255;

/// One broker queue of a queue name: the queue itself (a sharded queue's
/// lane), or one of its shards.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub(crate) struct Member {
    /// Its name on the broker.
    pub(crate) queue: String,
    /// Its shard number; `None` for the lane and for an unsharded queue.
    pub(crate) shard: Option<u16>,
}

/// The broker queues one queue name stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Shards {
    /// The name given: the queue, and the lane of a sharded queue.
    pub(crate) queue: String,
    /// How many shards it has (`NAME.s0` … `NAME.s{count-1}`); 0 when it
    /// is not sharded.
    pub(crate) count: u16,
}

impl Shards {
    /// Whether the queue has shards.
    pub(crate) fn is_sharded(&self) -> bool {
        self.count > 0
    }

    /// Its broker queues: the queue itself (the lane) first, then each
    /// shard in order.
    pub(crate) fn members(&self) -> Vec<Member> {
        std::iter::once(Member {
            queue: self.queue.clone(),
            shard: None,
        })
        .chain((0..self.count).map(|index| Member {
            queue: shard_name(&self.queue, index),
            shard: Some(index),
        }))
        .collect()
    }

    /// The queue name with its shards, for a heading: `emails` or
    /// `emails (lane and 4 shards)`.
    pub(crate) fn describe(&self) -> String {
        match self.count {
            0 => self.queue.clone(),
            1 => format!("{} (lane and 1 shard)", self.queue),
            n => format!("{} (lane and {n} shards)", self.queue),
        }
    }
}

/// What a listing shows in a shard column: `lane` or `s2` for a sharded
/// queue's queues, `-` for an unsharded queue.
pub(crate) fn label(sharded: bool, shard: Option<u16>) -> String {
    match (sharded, shard) {
        (_, Some(index)) => format!("s{index}"),
        (true, None) => "lane".to_owned(),
        (false, None) => "-".to_owned(),
    }
}

/// The shards of `queue`, found by passive declares over AMQP (see the
/// [module documentation](self)).
pub(crate) async fn discover(amqp: &Amqp, queue: &str) -> Result<Shards> {
    let mut count: u16 = 0;
    'probing: while count < MAX_SHARDS {
        let probes = (count..MAX_SHARDS)
            .take(PROBES_AT_ONCE)
            .map(|index| probe(amqp, queue, index));
        for exists in futures::future::join_all(probes).await {
            if !exists? {
                break 'probing;
            }
            count += 1;
        }
    }
    Ok(Shards {
        queue: queue.to_owned(),
        count,
    })
}

/// Whether shard `index` of `queue` exists.
async fn probe(amqp: &Amqp, queue: &str, index: u16) -> Result<bool> {
    let name = shard_name(queue, index);
    if name.len() > MAX_NAME_BYTES {
        return Ok(false);
    }
    Ok(amqp.counts(&name).await?.is_some())
}

/// The shards of `queue` among queue names at hand, by the rule
/// [`discover`] follows: `NAME.s0`, `NAME.s1`, … up to the first that
/// `exists` does not know, at most [`MAX_SHARDS`].
pub(crate) fn in_listing(queue: &str, exists: impl Fn(&str) -> bool) -> Shards {
    let count = (0..MAX_SHARDS)
        .take_while(|&index| exists(&shard_name(queue, index)))
        .count();
    Shards {
        queue: queue.to_owned(),
        count: u16::try_from(count).unwrap_or(MAX_SHARDS),
    }
}

/// Whether `name` is a shard of another queue among queue names at hand:
/// that queue (the lane) is there and, by the rule of [`in_listing`], has
/// this shard. Such a queue is shown under its logical queue, not on its
/// own.
pub(crate) fn is_listed_shard(name: &str, exists: impl Fn(&str) -> bool) -> bool {
    match parse_shard_name(name) {
        Some((queue, index)) => exists(queue) && in_listing(queue, exists).count > index,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sharded_queue_is_its_lane_then_its_shards() {
        let shards = Shards {
            queue: "emails".into(),
            count: 3,
        };
        let names: Vec<(String, Option<u16>)> = shards
            .members()
            .into_iter()
            .map(|m| (m.queue, m.shard))
            .collect();
        assert_eq!(
            names,
            [
                ("emails".to_owned(), None),
                ("emails.s0".to_owned(), Some(0)),
                ("emails.s1".to_owned(), Some(1)),
                ("emails.s2".to_owned(), Some(2)),
            ]
        );
        assert_eq!(shards.describe(), "emails (lane and 3 shards)");
        let alone = Shards::unsharded("emails.s2");
        assert_eq!(alone.members().len(), 1);
        assert_eq!(alone.describe(), "emails.s2");
        assert_eq!(label(true, None), "lane");
        assert_eq!(label(true, Some(2)), "s2");
        assert_eq!(label(false, None), "-");
    }

    #[test]
    fn a_listing_gives_the_shards_up_to_the_first_gap() {
        let names = ["q", "q.s0", "q.s1", "q.s3", "q.s1.dead", "other.s0"];
        let exists = |n: &str| names.contains(&n);
        assert_eq!(in_listing("q", exists).count, 2);
        assert_eq!(in_listing("q.s0", exists).count, 0);
        assert_eq!(in_listing("other", exists).count, 1);
        assert!(is_listed_shard("q.s1", exists));
        // After the gap, or without its lane: shown on its own.
        assert!(!is_listed_shard("q.s3", exists));
        assert!(!is_listed_shard("other.s0", exists));
        assert!(!is_listed_shard("q", exists));
        assert!(!is_listed_shard("q.s1.dead", exists));
    }
}
