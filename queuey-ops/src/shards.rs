//! The broker queues one queue name stands for: a sharded queue's *lane*
//! (the queue itself) and its shards `NAME.s0` … `NAME.s{N-1}`, each with
//! its own dead-letter, suspect and hold queues. Naming `emails` covers
//! them all, listings saying which shard each item is on; naming
//! `emails.s2` covers that shard alone.
//!
//! [`discover`] finds shards by passive declares over AMQP (exact, and
//! without the management plugin): `NAME.s0`, `NAME.s1`, … up to the first
//! missing one, at most [`MAX_SHARDS`], [`PROBES_AT_ONCE`] at a time. A
//! shard deleted by hand hides those after it (`topology verify` reports
//! it). [`in_listing`] applies the same rule to a queue listing at hand.

use serde::Serialize;

use crate::amqp::Amqp;
use crate::error::Result;

pub(crate) use queuey_core::shard::{MAX_SHARDS, parse_shard_name, shard_name};

/// Probes [`discover`] has in flight at once.
pub(crate) const PROBES_AT_ONCE: usize = 16;

/// The longest queue name AMQP allows, in bytes.
const MAX_NAME_BYTES: usize = 255;

/// One broker queue of a queue name, and its shard (`None`: the lane).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub(crate) struct Member {
    pub(crate) queue: String,
    pub(crate) shard: Option<u16>,
}

/// The broker queues one queue name stands for: the queue (the lane) and
/// `count` shards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Shards {
    pub(crate) queue: String,
    pub(crate) count: u16,
}

impl Shards {
    pub(crate) fn is_sharded(&self) -> bool {
        self.count > 0
    }

    /// Its broker queues: the lane first, then each shard.
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

    /// `emails`, or `emails (lane and 4 shards)`.
    pub(crate) fn describe(&self) -> String {
        match self.count {
            0 => self.queue.clone(),
            1 => format!("{} (lane and 1 shard)", self.queue),
            n => format!("{} (lane and {n} shards)", self.queue),
        }
    }
}

/// A shard column's cell: `lane`, `s2`, or `-` for an unsharded queue.
pub(crate) fn label(sharded: bool, shard: Option<u16>) -> String {
    match (sharded, shard) {
        (_, Some(index)) => format!("s{index}"),
        (true, None) => "lane".to_owned(),
        (false, None) => "-".to_owned(),
    }
}

/// The shards of `queue`, found by passive declares.
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

/// The shards of `queue` among queue names at hand, by [`discover`]'s rule.
pub(crate) fn in_listing(queue: &str, exists: impl Fn(&str) -> bool) -> Shards {
    let count = (0..MAX_SHARDS)
        .take_while(|&index| exists(&shard_name(queue, index)))
        .count();
    Shards {
        queue: queue.to_owned(),
        count: u16::try_from(count).unwrap_or(MAX_SHARDS),
    }
}

/// Whether `name` is a shard of a lane among queue names at hand (shown
/// under that queue, not on its own).
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
