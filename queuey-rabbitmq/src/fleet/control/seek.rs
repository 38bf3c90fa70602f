//! Where a follower that starts looks for a snapshot of the state, as a
//! pure decision: among the stream's last [`SEEK_RECORDS`] records, or,
//! when the stream's end cannot be read, among the records of its last
//! [`SEEK_INTERVALS`] snapshot intervals. Without a snapshot there (a young
//! stream, a fleet that was down, more honest records in an interval than
//! the window holds), the follower reads the stream from its first record.
//!
//! Followers write a snapshot every interval, and one more after every ten
//! to twenty thousand records they refuse, so the last records hold one
//! whether the stream is quiet or flooded: a start reads a bounded number
//! of records, however many the stream holds.

use std::time::Duration;

use super::live::StartAt;

/// How many records back from the stream's end a follower looks.
pub(super) const SEEK_RECORDS: u64 = 40_000;

/// How many snapshot intervals back a follower looks when it cannot read
/// where the stream ends: snapshots are two intervals apart at most, and a
/// third leaves room for a slow writer.
pub(super) const SEEK_INTERVALS: u32 = 3;

/// Where a follower looks for a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seek {
    /// From this offset, [`SEEK_RECORDS`] before the end.
    Near(u64),
    /// From this time (seconds since the Unix epoch).
    Since(u64),
}

impl Seek {
    /// Where a follower starts at `now_ms`, given the offset of the
    /// stream's end (`None` when it could not be read) and the snapshot
    /// interval; `None`: a stream no longer than [`SEEK_RECORDS`], read
    /// from its first record.
    pub(super) fn start(tail: Option<u64>, now_ms: u64, interval: Duration) -> Option<Seek> {
        match tail {
            Some(tail) if tail <= SEEK_RECORDS => None,
            Some(tail) => Some(Seek::Near(tail - SEEK_RECORDS)),
            None => {
                let back = interval.saturating_mul(SEEK_INTERVALS).as_secs();
                Some(Seek::Since((now_ms / 1_000).saturating_sub(back)))
            }
        }
    }

    /// Where the consumer starts.
    pub(super) fn from(self) -> StartAt {
        match self {
            Seek::Near(offset) => StartAt::Offset(offset),
            Seek::Since(since) => StartAt::Since(since),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: u64 = 1_700_000_000_000;
    const TEN_MINUTES: Duration = Duration::from_secs(600);

    #[test]
    fn the_last_records_when_the_end_is_known_else_the_last_intervals() {
        let near = Seek::start(Some(100_000), NOW_MS, TEN_MINUTES);
        assert_eq!(near, Some(Seek::Near(60_000)));
        assert_eq!(near.map(Seek::from), Some(StartAt::Offset(60_000)));
        let by_time = Seek::start(None, NOW_MS, TEN_MINUTES);
        assert_eq!(by_time, Some(Seek::Since(NOW_MS / 1_000 - 1_800)));
        assert_eq!(
            by_time.map(Seek::from),
            Some(StartAt::Since(NOW_MS / 1_000 - 1_800))
        );
        assert_eq!(
            Seek::start(None, 5_000, TEN_MINUTES),
            Some(Seek::Since(0)),
            "a clock near the epoch saturates"
        );
    }

    #[test]
    fn a_stream_no_longer_than_the_window_is_read_from_its_start() {
        assert_eq!(Seek::start(Some(SEEK_RECORDS), NOW_MS, TEN_MINUTES), None);
        assert_eq!(Seek::start(Some(12), NOW_MS, TEN_MINUTES), None);
        assert!(Seek::start(Some(SEEK_RECORDS + 1), NOW_MS, TEN_MINUTES).is_some());
    }
}
