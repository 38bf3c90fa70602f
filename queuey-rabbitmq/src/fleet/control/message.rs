//! The messages of the control stream, as pure functions: a command, a
//! renewed pause, a snapshot of the state and a sync marker as they are
//! published, and what a delivery from the stream is.

use bytes::Bytes;
use lapin::BasicProperties;
use lapin::types::AMQPValue;
use queuey_core::control::{ControlRecord, ControlState};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::outbox::Outgoing;
use crate::properties::{self, PERSISTENT};
use crate::topology::{RENEWS_AFTER_HEADER, SNAPSHOT_OF_HEADER, SNAPSHOT_TYPE, SYNC_MARKER_TYPE};

/// The header every delivery from a stream carries: its offset.
const STREAM_OFFSET_HEADER: &str = "x-stream-offset";

/// The largest snapshot published or read, in bytes: far below RabbitMQ 4's
/// default 16 MiB, and room for tens of thousands of cancellations.
pub(super) const MAX_SNAPSHOT_BYTES: usize = 8 * 1024 * 1024;

/// A snapshot's body: the records that rebuild the state.
#[derive(Debug, Serialize, Deserialize)]
struct SnapshotBody {
    /// The format's version.
    v: u32,
    /// When it was taken, in milliseconds since the Unix epoch.
    at_ms: u64,
    records: Vec<ControlRecord>,
}

/// A persistent message for `stream` with `body`, carrying `message_id`.
pub(crate) fn persistent(stream: &str, body: Vec<u8>, message_id: String) -> Outgoing {
    Outgoing {
        exchange: None,
        queue: stream.to_owned(),
        body: Bytes::from(body),
        properties: BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_message_id(properties::short(&message_id)),
        message_id,
    }
}

/// A command for `stream`: its JSON as the body, its id as the message id.
pub(super) fn command(stream: &str, record: &ControlRecord) -> Outgoing {
    persistent(stream, record.encode(), record.id.to_string())
}

/// A pause published again by a follower that had read the stream up to
/// offset `after` (see [`RENEWS_AFTER_HEADER`]).
pub(super) fn renewal(stream: &str, record: &ControlRecord, after: u64) -> Outgoing {
    let mut out = command(stream, record);
    out.properties = properties::with_header(out.properties, RENEWS_AFTER_HEADER, after);
    out
}

/// A snapshot of `state` taken at `at_ms`, having read up to offset `of`
/// ([`SNAPSHOT_TYPE`], [`SNAPSHOT_OF_HEADER`]); `Err` with the body's size
/// when it is over [`MAX_SNAPSHOT_BYTES`].
pub(super) fn snapshot(
    stream: &str,
    state: &ControlState,
    of: u64,
    at_ms: u64,
) -> Result<Outgoing, usize> {
    let body = SnapshotBody {
        v: 1,
        at_ms,
        records: state.records(),
    };
    // Records hold strings, numbers and JSON values only.
    let body = serde_json::to_vec(&body).unwrap_or_default();
    if body.len() > MAX_SNAPSHOT_BYTES {
        return Err(body.len());
    }
    let mut out = persistent(stream, body, Uuid::new_v4().to_string());
    let typed = out.properties.with_type(properties::short(SNAPSHOT_TYPE));
    out.properties = properties::with_header(typed, SNAPSHOT_OF_HEADER, of);
    Ok(out)
}

/// A sync marker: type [`SYNC_MARKER_TYPE`], the nonce as body and
/// message id. The heartbeat stream's reads use the same markers.
pub(crate) fn sync_marker(stream: &str, nonce: Uuid) -> Outgoing {
    let mut out = persistent(stream, nonce.to_string().into_bytes(), nonce.to_string());
    out.properties = out
        .properties
        .with_type(properties::short(SYNC_MARKER_TYPE));
    out
}

/// What a delivery from the control stream is.
#[derive(Debug, PartialEq)]
pub(super) enum Read {
    /// A follower's sync marker, with its nonce.
    Sync(Uuid),
    /// A command; `renews_after` is set on a pause a follower published
    /// again.
    Record {
        record: ControlRecord,
        renews_after: Option<u64>,
    },
    /// A snapshot of the state as it was once every record up to offset
    /// `of` was applied: the records that rebuild it.
    Snapshot {
        records: Vec<ControlRecord>,
        of: u64,
        at_ms: u64,
    },
    /// A body over the size a command (or a snapshot) may have, left
    /// undecoded.
    TooLarge(usize),
    /// Not a command this version knows (a newer one, or garbage).
    Skip,
}

/// Reads a delivery's properties and body; a body over
/// [`MAX_RECORD_BYTES`](queuey_core::control::MAX_RECORD_BYTES) is not
/// decoded.
pub(super) fn read(properties: &BasicProperties, body: &[u8]) -> Read {
    if is_sync_marker(properties) {
        return sync_nonce(body).map_or(Read::Skip, Read::Sync);
    }
    if is_snapshot(properties) {
        return read_snapshot(properties, body);
    }
    if queuey_core::control::check_size(body.len()).is_err() {
        return Read::TooLarge(body.len());
    }
    match ControlRecord::decode(body) {
        Some(record) => Read::Record {
            record,
            renews_after: integer_header(properties, RENEWS_AFTER_HEADER),
        },
        None => Read::Skip,
    }
}

/// Reads a snapshot: its offset header and its records (a body over
/// [`MAX_SNAPSHOT_BYTES`] is not decoded).
fn read_snapshot(properties: &BasicProperties, body: &[u8]) -> Read {
    if body.len() > MAX_SNAPSHOT_BYTES {
        return Read::TooLarge(body.len());
    }
    let Some(of) = integer_header(properties, SNAPSHOT_OF_HEADER) else {
        return Read::Skip;
    };
    match serde_json::from_slice::<SnapshotBody>(body) {
        Ok(SnapshotBody {
            v: 1,
            at_ms,
            records,
        }) => Read::Snapshot { records, of, at_ms },
        _ => Read::Skip,
    }
}

/// Whether a delivery is a snapshot (by its `type`): what a follower that
/// seeks one decodes, and nothing else but markers.
pub(super) fn is_snapshot(properties: &BasicProperties) -> bool {
    properties.kind().as_ref().map(|k| k.as_str()) == Some(SNAPSHOT_TYPE)
}

/// Whether a delivery is a sync marker (by its `type`).
pub(crate) fn is_sync_marker(properties: &BasicProperties) -> bool {
    properties.kind().as_ref().map(|k| k.as_str()) == Some(SYNC_MARKER_TYPE)
}

/// The nonce of a sync marker's body, if it is one.
pub(crate) fn sync_nonce(body: &[u8]) -> Option<Uuid> {
    std::str::from_utf8(body)
        .ok()
        .and_then(|text| Uuid::parse_str(text).ok())
}

/// The stream offset of a delivery.
pub(super) fn offset(properties: &BasicProperties) -> Option<u64> {
    integer_header(properties, STREAM_OFFSET_HEADER)
}

fn integer_header(properties: &BasicProperties, name: &str) -> Option<u64> {
    let value = properties.headers().as_ref()?.inner().get(name)?;
    let n = match value {
        AMQPValue::LongLongInt(n) => *n,
        AMQPValue::LongInt(n) => i64::from(*n),
        AMQPValue::LongUInt(n) => i64::from(*n),
        AMQPValue::ShortInt(n) => i64::from(*n),
        AMQPValue::ShortUInt(n) => i64::from(*n),
        _ => return None,
    };
    u64::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::FieldTable;
    use queuey_core::control::Command;

    fn delivered(out: &Outgoing, offset: i64) -> BasicProperties {
        let mut headers = out.properties.headers().clone().unwrap_or_default();
        headers.insert(STREAM_OFFSET_HEADER.into(), AMQPValue::LongLongInt(offset));
        out.properties.clone().with_headers(headers)
    }

    #[test]
    fn commands_renewals_and_markers_read_back_as_sent() {
        let record = ControlRecord::new(Command::Pause { queue: "q".into() }).by("ops");
        let out = command("s", &record);
        assert_eq!(out.queue, "s");
        assert_eq!(out.message_id, record.id.to_string());
        assert_eq!(*out.properties.delivery_mode(), Some(PERSISTENT));
        let props = delivered(&out, 7);
        assert_eq!(offset(&props), Some(7));
        assert_eq!(
            read(&props, &out.body),
            Read::Record {
                record: record.clone(),
                renews_after: None
            }
        );

        let renewed = renewal("s", &record, 41);
        assert_eq!(
            read(&delivered(&renewed, 42), &renewed.body),
            Read::Record {
                record: record.clone(),
                renews_after: Some(41)
            }
        );

        let mut state = ControlState::default();
        state.apply(&record);
        let snap = snapshot("s", &state, 41, 1_000).unwrap();
        assert_eq!(snap.queue, "s");
        assert_eq!(
            read(&delivered(&snap, 50), &snap.body),
            Read::Snapshot {
                records: state.records(),
                of: 41,
                at_ms: 1_000
            }
        );
        assert_eq!(ControlRecord::decode(&snap.body), None, "never a command");

        let nonce = Uuid::new_v4();
        let marker = sync_marker("s", nonce);
        assert_eq!(read(&marker.properties, &marker.body), Read::Sync(nonce));
        // A marker's body is never a command.
        assert_eq!(ControlRecord::decode(&marker.body), None);
    }

    #[test]
    fn anything_else_is_skipped() {
        let plain = BasicProperties::default();
        assert_eq!(read(&plain, b"{\"command\":\"reboot\"}"), Read::Skip);
        assert_eq!(read(&plain, b"\xff"), Read::Skip);
        let huge = vec![b' '; queuey_core::control::MAX_RECORD_BYTES + 1];
        assert_eq!(read(&plain, &huge), Read::TooLarge(huge.len()));
        let marker = plain.clone().with_type(SYNC_MARKER_TYPE.into());
        assert_eq!(read(&marker, b"not a nonce"), Read::Skip);
        let mut headers = FieldTable::default();
        headers.insert(STREAM_OFFSET_HEADER.into(), AMQPValue::LongLongInt(-1));
        assert_eq!(offset(&plain.clone().with_headers(headers)), None);
        assert_eq!(offset(&BasicProperties::default()), None);

        let snap = plain.clone().with_type(SNAPSHOT_TYPE.into());
        let body = br#"{"v":1,"at_ms":5,"records":[]}"#;
        assert_eq!(read(&snap, body), Read::Skip, "a snapshot needs its offset");
        let mut headers = FieldTable::default();
        headers.insert(SNAPSHOT_OF_HEADER.into(), AMQPValue::LongLongInt(3));
        let snap = snap.with_headers(headers);
        assert_eq!(
            read(&snap, body),
            Read::Snapshot {
                records: Vec::new(),
                of: 3,
                at_ms: 5
            }
        );
        assert_eq!(
            read(&snap, br#"{"v":2,"at_ms":5,"records":[]}"#),
            Read::Skip
        );
        let huge = vec![b' '; MAX_SNAPSHOT_BYTES + 1];
        assert_eq!(read(&snap, &huge), Read::TooLarge(huge.len()));
    }

    #[test]
    fn a_state_too_large_is_not_snapshotted() {
        let mut state = ControlState::default();
        for _ in 0..100_000 {
            state.apply(&ControlRecord::new(queuey_core::control::Command::Cancel {
                job_id: Uuid::new_v4(),
            }));
        }
        let size = snapshot("s", &state, 0, 0).unwrap_err();
        assert!(size > MAX_SNAPSHOT_BYTES);
    }
}
