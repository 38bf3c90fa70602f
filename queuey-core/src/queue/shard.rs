//! Sharded queues: one logical queue spread over several broker queues.
//!
//! One broker queue tops out near one broker core. A queue declared with
//! [`QueueConfig::shards`](crate::QueueConfig::shards) is N broker queues,
//! `NAME.s0` … `NAME.s{N-1}`, each with its own holds, suspect and
//! dead-letter queue, plus `NAME` itself: the *lane* that producers which do
//! not shard (an older version, another language, a resharding) publish to.
//! A worker consumes the lane and every shard; a producer publishes to the
//! shards only: a job with a key
//! ([`EnqueueOptions::key`](crate::EnqueueOptions::key), `#[job(key = ..)]`)
//! to [`shard_for_key`] (one key, one shard, its jobs in order), others
//! round-robin. A retried or deferred job returns to the shard it came from.
//!
//! Each shard has its own dead-letter queue (`NAME.s2.dead`), so its dead
//! letters, holds and suspects fail over with it, a dead letter is redriven
//! to its shard, and no shard's queue bottlenecks the others. The `queuey`
//! tool reads a queue's dead-letter queues together.

use std::fmt;

/// The most shards one queue may have.
pub const MAX_SHARDS: u16 = 256;

/// Where one broker queue stands in a sharded logical queue: shard `index`
/// of `count`. [`QueueConfig::physical`](crate::QueueConfig::physical) sets
/// it on each shard's settings; the lane and an unsharded queue have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    index: u16,
    count: u16,
}

impl Shard {
    pub(crate) fn new(index: u16, count: u16) -> Self {
        Shard { index, count }
    }

    /// This shard's number, from 0.
    pub fn index(self) -> u16 {
        self.index
    }

    /// How many shards the logical queue has.
    pub fn count(self) -> u16 {
        self.count
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {} of {}", self.index, self.count)
    }
}

/// The broker name of shard `index` of the logical queue `queue`:
/// `queue.s{index}`.
///
/// ```
/// assert_eq!(queuey_core::shard::shard_name("app.emails", 3), "app.emails.s3");
/// ```
pub fn shard_name(queue: &str, index: u16) -> String {
    format!("{queue}.s{index}")
}

/// The logical queue and shard number a broker queue name stands for, when
/// it has the form of a shard's name (`NAME.s{index}`).
///
/// ```
/// use queuey_core::shard::parse_shard_name;
///
/// assert_eq!(parse_shard_name("app.emails.s3"), Some(("app.emails", 3)));
/// assert_eq!(parse_shard_name("app.emails"), None);
/// assert_eq!(parse_shard_name("app.emails.s03"), None);
/// ```
pub fn parse_shard_name(name: &str) -> Option<(&str, u16)> {
    let (queue, suffix) = name.rsplit_once(".s")?;
    let index: u16 = suffix.parse().ok()?;
    // One spelling per shard: no sign, no leading zero.
    (!queue.is_empty() && suffix == index.to_string()).then_some((queue, index))
}

/// The shard a job with `key` goes to among `count` shards.
///
/// The same key gives the same shard in every process and every version:
/// the key's UTF-8 bytes are hashed with 64-bit FNV-1a, and the hash picks
/// a shard by jump consistent hashing (Lamping and Veach), so that growing
/// a queue from N to M shards moves only the keys that must move (about
/// `1 - N/M` of them) and every moved key goes to a new shard.
///
/// ```
/// use queuey_core::shard::shard_for_key;
///
/// let shard = shard_for_key("customer-42", 4);
/// assert!(shard < 4);
/// assert_eq!(shard, shard_for_key("customer-42", 4));
/// assert_eq!(shard_for_key("anything", 1), 0);
/// ```
pub fn shard_for_key(key: &str, count: u16) -> u16 {
    jump(fnv1a(key.as_bytes()), count)
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

/// Jump consistent hash: a bucket in `0..count` for `key`.
fn jump(mut key: u64, count: u16) -> u16 {
    let count = i64::from(count.max(1));
    let mut bucket: i64 = -1;
    let mut next: i64 = 0;
    while next < count {
        bucket = next;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        let step = f64::from(1u32 << 31) / (((key >> 33) + 1) as f64);
        next = ((bucket + 1) as f64 * step) as i64;
    }
    u16::try_from(bucket).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for index in [0, 1, 9, 10, 255] {
            let name = shard_name("q.x", index);
            assert_eq!(parse_shard_name(&name), Some(("q.x", index)));
        }
        for not_a_shard in [
            "q", "q.s", "q.sx", "q.s-1", "q.s+1", ".s1", "q.s01", "q.s70000",
        ] {
            assert_eq!(parse_shard_name(not_a_shard), None, "{not_a_shard}");
        }
    }

    #[test]
    fn fnv_matches_the_published_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn keys_spread_evenly() {
        let mut counts = [0u32; 4];
        for i in 0..40_000 {
            counts[usize::from(shard_for_key(&format!("key-{i}"), 4))] += 1;
        }
        for count in counts {
            assert!((9_000..11_000).contains(&count), "{counts:?}");
        }
    }

    #[test]
    fn growing_moves_keys_only_to_new_shards() {
        let mut moved = 0;
        for i in 0..10_000 {
            let key = format!("order-{i}");
            let (before, after) = (shard_for_key(&key, 4), shard_for_key(&key, 6));
            if before != after {
                assert!(after >= 4, "{key}: {before} -> {after}");
                moved += 1;
            }
        }
        // About a third of the keys move to the two new shards.
        assert!((2_800..3_900).contains(&moved), "{moved}");
        assert_eq!(shard_for_key("anything", 0), 0);
    }

    #[test]
    fn a_key_keeps_its_shard_across_releases() {
        // Pinned (computed independently of this code): a change here would
        // send a key's new jobs to another shard than its queued ones,
        // breaking their order.
        let keys = ["a", "customer-42", "order-7", ""];
        let of_8: Vec<u16> = keys.iter().map(|k| shard_for_key(k, 8)).collect();
        let of_4: Vec<u16> = keys.iter().map(|k| shard_for_key(k, 4)).collect();
        assert_eq!(of_8, [2, 1, 6, 1]);
        assert_eq!(of_4, [2, 1, 2, 1]);
    }
}
