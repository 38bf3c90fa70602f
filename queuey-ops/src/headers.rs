//! The headers queuey writes and the ones a redrive strips or adds.

use lapin::types::{AMQPValue, FieldTable};

/// Why the job died (set on every dead letter).
pub(crate) const REASON: &str = queuey_rabbitmq::topology::REASON_HEADER;
/// The work queue the job was consumed from.
pub(crate) const ORIGINAL_QUEUE: &str = queuey_rabbitmq::topology::ORIGINAL_QUEUE_HEADER;
/// The attempts the job had made when it died.
pub(crate) const ATTEMPTS: &str = queuey_rabbitmq::topology::ATTEMPTS_HEADER;
/// When the job died, in ms since the Unix epoch.
pub(crate) const DIED_AT: &str = queuey_rabbitmq::topology::DIED_AT_HEADER;
/// Why a malformed body did not decode as an envelope.
pub(crate) const PARSE_ERROR: &str = queuey_rabbitmq::topology::PARSE_ERROR_HEADER;
/// On a hold publish: when the job becomes due, in ms since the Unix epoch.
pub(crate) const DUE_AT: &str = queuey_rabbitmq::topology::DUE_AT_HEADER;
/// Stamped by a redrive: the id of the redrive run that moved the job.
pub(crate) const REDRIVE_ID: &str = "queuey-redrive-id";
/// Stamped by a redrive: how many times the job has been redriven.
pub(crate) const REDRIVE_COUNT: &str = "queuey-redrive-count";

/// Headers the broker owns or queuey's dead-lettering set; none of them may
/// travel back onto a work queue.
const STRIPPED_ON_REDRIVE: &[&str] = &[
    REASON,
    ORIGINAL_QUEUE,
    ATTEMPTS,
    DIED_AT,
    PARSE_ERROR,
    "x-death",
];
const STRIPPED_PREFIXES: &[&str] = &["x-first-death-", "x-last-death-"];

/// The text of a header, when it is a string.
pub(crate) fn text(headers: Option<&FieldTable>, name: &str) -> Option<String> {
    match headers?.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// The value of a header, when it is an integer of any width.
pub(crate) fn integer(headers: Option<&FieldTable>, name: &str) -> Option<i64> {
    match headers?.inner().get(name)? {
        AMQPValue::ShortShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::LongInt(n) => Some(i64::from(*n)),
        AMQPValue::LongUInt(n) => Some(i64::from(*n)),
        AMQPValue::LongLongInt(n) => Some(*n),
        AMQPValue::Timestamp(n) => i64::try_from(*n).ok(),
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// The headers a redriven message carries: the dead letter's own, minus
/// queuey's dead-letter headers and the broker's death records, plus the
/// redrive id and an incremented redrive count.
pub(crate) fn for_redrive(headers: Option<&FieldTable>, redrive_id: &str) -> FieldTable {
    let count = integer(headers, REDRIVE_COUNT)
        .unwrap_or(0)
        .saturating_add(1);
    let mut out = FieldTable::default();
    if let Some(headers) = headers {
        for (key, value) in headers.inner() {
            let name = key.as_str();
            let stripped = STRIPPED_ON_REDRIVE.contains(&name)
                || STRIPPED_PREFIXES.iter().any(|p| name.starts_with(p));
            if !stripped {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out.insert(REDRIVE_ID.into(), AMQPValue::LongString(redrive_id.into()));
    out.insert(REDRIVE_COUNT.into(), AMQPValue::LongLongInt(count));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redrive_strips_death_headers_and_counts_itself() {
        let mut h = FieldTable::default();
        h.insert(REASON.into(), AMQPValue::LongString("boom".into()));
        h.insert(ORIGINAL_QUEUE.into(), AMQPValue::LongString("q".into()));
        h.insert(ATTEMPTS.into(), AMQPValue::LongLongInt(3));
        h.insert("x-death".into(), AMQPValue::LongString("x".into()));
        h.insert(
            "x-first-death-queue".into(),
            AMQPValue::LongString("q".into()),
        );
        h.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        h.insert(REDRIVE_COUNT.into(), AMQPValue::LongInt(2));
        let out = for_redrive(Some(&h), "r1");
        let keys: Vec<&str> = out.inner().keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, vec![REDRIVE_COUNT, REDRIVE_ID, "tenant"]);
        assert_eq!(integer(Some(&out), REDRIVE_COUNT), Some(3));
        assert_eq!(text(Some(&out), REDRIVE_ID).as_deref(), Some("r1"));
    }

    #[test]
    fn integers_of_every_width_and_numeric_strings_are_read() {
        let mut h = FieldTable::default();
        h.insert("a".into(), AMQPValue::ShortInt(-4));
        h.insert("b".into(), AMQPValue::LongString("1700000000000".into()));
        h.insert("c".into(), AMQPValue::Boolean(true));
        assert_eq!(integer(Some(&h), "a"), Some(-4));
        assert_eq!(integer(Some(&h), "b"), Some(1_700_000_000_000));
        assert_eq!(integer(Some(&h), "c"), None);
        assert_eq!(integer(None, "a"), None);
    }
}
