//! Consumer tags: unique within the process, readable in the broker's
//! consumer list.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The longest queue-name part of a consumer tag, in bytes.
const TAG_QUEUE_BYTES: usize = 160;

static TAG_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A consumer tag `queuey.{queue}.{nanos:x}.{sequence}`, the queue cut to
/// [`TAG_QUEUE_BYTES`] on a character boundary. Unique within the process,
/// and readable in the broker's consumer list.
pub(super) fn consumer_tag(queue: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let sequence = TAG_SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!(
        "queuey.{}.{nanos:x}.{sequence}",
        truncate(queue, TAG_QUEUE_BYTES)
    )
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_have_the_documented_shape() {
        let tag = consumer_tag("app.emails");
        let parts: Vec<&str> = tag.splitn(2, '.').collect();
        assert_eq!(parts[0], "queuey");
        let rest = tag.strip_prefix("queuey.app.emails.").unwrap();
        let (nanos, sequence) = rest.split_once('.').unwrap();
        assert!(u128::from_str_radix(nanos, 16).is_ok(), "{tag}");
        assert!(sequence.parse::<u64>().is_ok(), "{tag}");
    }

    #[test]
    fn tags_are_unique() {
        assert_ne!(consumer_tag("q"), consumer_tag("q"));
    }

    #[test]
    fn long_queue_names_are_cut_to_160_bytes_on_a_char_boundary() {
        let queue = "é".repeat(120); // 240 bytes
        let tag = consumer_tag(&queue);
        let part = tag.strip_prefix("queuey.").unwrap();
        let cut = &part[..part.rfind('.').unwrap()];
        let cut = &cut[..cut.rfind('.').unwrap()];
        assert_eq!(cut.len(), 160);
        assert!(tag.len() <= 255);
        assert_eq!(truncate("abc", 160), "abc");
        assert_eq!(truncate("aé", 2), "a");
    }
}
