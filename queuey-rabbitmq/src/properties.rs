//! Message properties and headers, built from scratch for every publish.
//!
//! A job carries only what something reads: persistence (delivery mode 2),
//! its job id as the message id (publisher confirms are matched by it),
//! its priority when it has one, and on a dead letter the three documented
//! headers. Everything else (type, enqueue time, content type) is in the
//! envelope, which is the only thing a consumer reads, so each property
//! would be a second copy the broker parses and stores for every message.
//! Messages written by earlier versions, which also carried content type,
//! type and timestamp, are consumed the same way: their properties are
//! ignored.
//!
//! Nothing is copied from a delivery's properties or headers into a
//! republish, so broker bookkeeping (`x-death`, `x-first-death-*`,
//! `x-last-death-*`) and sender-selected routing (`CC`, `BCC`) never travel
//! on.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use queuey_core::Envelope;
use queuey_core::backend::ReplyTo;

/// Delivery mode of a persistent message.
pub(crate) const PERSISTENT: u8 = 2;
/// Longest `x-death-reason` value, in bytes; the properties must fit in one
/// frame, and a reason is a label, not a log.
pub(crate) const MAX_REASON_BYTES: usize = 4096;

pub(crate) use crate::topology::{
    ATTEMPTS_HEADER, DIED_AT_HEADER, DUE_AT_HEADER, ORIGINAL_QUEUE_HEADER, PARSE_ERROR_HEADER,
    REASON_HEADER, UNSETTLED_DELIVERIES_HEADER,
};

/// The properties of an envelope: persistent, its job id as message id,
/// `priority` unless 0 (callers pass 0 for a queue without priorities),
/// and for a job a caller waits for, `reply_to` and `correlation_id`. Every
/// publish of a job goes through here, so the reply address travels on
/// through holds, retries, deferrals, suspect copies and dead letters.
pub(crate) fn job_properties(envelope: &Envelope, priority: u8) -> BasicProperties {
    let mut id = uuid::Uuid::encode_buffer();
    let mut properties = BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_message_id(short(envelope.job_id.hyphenated().encode_lower(&mut id)));
    if let Some(to) = &envelope.reply_to {
        properties = properties
            .with_reply_to(short(to.address()))
            .with_correlation_id(short(to.correlation_id()));
    }
    if priority == 0 {
        properties
    } else {
        properties.with_priority(priority)
    }
}

/// The properties of a delivered job published again as it came (a
/// suspect copy, a hand-back): [`job_properties`] with `priority`, plus the
/// delivery's `queuey-*` headers and no other.
pub(crate) fn carried(
    envelope: &Envelope,
    original: &BasicProperties,
    priority: u8,
) -> BasicProperties {
    let properties = job_properties(envelope, priority);
    let Some(headers) = original.headers() else {
        return properties;
    };
    let mut kept = FieldTable::default();
    for (key, value) in headers.inner() {
        if key.as_str().starts_with("queuey-") {
            kept.insert(key.clone(), value.clone());
        }
    }
    if kept.inner().is_empty() {
        return properties;
    }
    properties.with_headers(kept)
}

/// The reply address a delivery carries (see [`job_properties`]), if a
/// caller waits for it.
pub(crate) fn reply_to(properties: &BasicProperties) -> Option<ReplyTo> {
    let address = properties.reply_to().as_ref()?;
    let correlation_id = properties.correlation_id().as_ref()?;
    Some(ReplyTo::new(address.as_str(), correlation_id.as_str()))
}

/// What a dead letter records about why, where and when it died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeadLetterInfo<'a> {
    pub(crate) reason: &'a str,
    pub(crate) original_queue: &'a str,
    pub(crate) attempts: u32,
    /// When, in milliseconds since the Unix epoch.
    pub(crate) died_at_ms: u64,
    /// Why the body is not an envelope, for a malformed one.
    pub(crate) parse_error: Option<&'a str>,
}

impl<'a> DeadLetterInfo<'a> {
    /// A job from `original_queue` dying now, after `attempts`, for `reason`.
    pub(crate) fn now(reason: &'a str, original_queue: &'a str, attempts: u32) -> Self {
        DeadLetterInfo {
            reason,
            original_queue,
            attempts,
            died_at_ms: queuey_core::__private::now_ms(),
            parse_error: None,
        }
    }
}

/// Adds the dead-letter headers to `properties`, replacing any headers.
pub(crate) fn with_dead_letter_headers(
    properties: BasicProperties,
    info: &DeadLetterInfo<'_>,
) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(short(REASON_HEADER), long(cap_reason(info.reason)));
    headers.insert(short(ORIGINAL_QUEUE_HEADER), long(info.original_queue));
    headers.insert(
        short(ATTEMPTS_HEADER),
        AMQPValue::LongLongInt(i64::from(info.attempts)),
    );
    headers.insert(short(DIED_AT_HEADER), integer(info.died_at_ms));
    if let Some(error) = info.parse_error {
        headers.insert(short(PARSE_ERROR_HEADER), long(cap_reason(error)));
    }
    properties.with_headers(headers)
}

/// Adds the `queuey-due-at` header to `properties`, keeping other headers.
pub(crate) fn with_due_at(properties: BasicProperties, due_at_ms: u64) -> BasicProperties {
    with_header(properties, DUE_AT_HEADER, due_at_ms)
}

/// Sets the message's own time to live, `ms` milliseconds: a held job
/// leaves its hold queue then, or at the queue's TTL if that comes first.
/// The broker drops the property when it dead-letters the message, so the
/// job does not expire again in its work queue.
pub(crate) fn with_expiration(properties: BasicProperties, ms: u64) -> BasicProperties {
    properties.with_expiration(ms.to_string().into())
}

/// Adds the `queuey-unsettled-deliveries` header to `properties`, keeping
/// other headers.
pub(crate) fn with_unsettled_deliveries(
    properties: BasicProperties,
    count: u32,
) -> BasicProperties {
    with_header(properties, UNSETTLED_DELIVERIES_HEADER, u64::from(count))
}

/// Adds the integer header `name` to `properties`, keeping other headers.
pub(crate) fn with_header(properties: BasicProperties, name: &str, n: u64) -> BasicProperties {
    let mut headers = properties.headers().clone().unwrap_or_default();
    headers.insert(short(name), integer(n));
    properties.with_headers(headers)
}

/// A 64-bit integer header value (capped at `i64::MAX`).
pub(crate) fn integer(n: u64) -> AMQPValue {
    AMQPValue::LongLongInt(i64::try_from(n).unwrap_or(i64::MAX))
}

/// A delivery's message id, or a fresh one when it has none.
pub(crate) fn message_id_or_new(properties: &BasicProperties) -> String {
    properties.message_id().as_ref().map_or_else(
        || uuid::Uuid::new_v4().to_string(),
        |id| id.as_str().to_owned(),
    )
}

/// The properties of a body that is not an envelope, copied to the
/// dead-letter queue: persistent, its own message id kept when it has one.
pub(crate) fn malformed_properties(message_id: &str) -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_message_id(short(message_id))
}

/// `reason`, cut to at most [`MAX_REASON_BYTES`] on a character boundary.
pub(crate) fn cap_reason(reason: &str) -> &str {
    cut(reason, MAX_REASON_BYTES)
}

/// A short string from text this crate controls or checked to fit; longer
/// text is cut on a character boundary rather than panicking.
pub(crate) fn short(s: &str) -> ShortString {
    ShortString::try_new(cut(s, 255)).unwrap_or_default()
}

/// `s`, cut to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// Message properties as plain values, for tests to compare.
#[cfg(test)]
pub(crate) mod plain {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, ShortString};

    /// The properties of a message as plain values, read back from the wire.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) struct PlainProperties {
        pub(crate) delivery_mode: Option<u8>,
        pub(crate) content_type: Option<String>,
        pub(crate) message_id: Option<String>,
        pub(crate) job_type: Option<String>,
        pub(crate) priority: Option<u8>,
        pub(crate) timestamp: Option<u64>,
        pub(crate) headers: Vec<(String, String)>,
    }

    impl PlainProperties {
        pub(crate) fn read(p: &BasicProperties) -> Self {
            let text = |s: &Option<ShortString>| s.as_ref().map(|s| s.as_str().to_owned());
            let headers = p
                .headers()
                .as_ref()
                .map(|h| {
                    h.inner()
                        .iter()
                        .map(|(k, v)| {
                            let v = match v {
                                AMQPValue::LongString(s) => {
                                    String::from_utf8_lossy(s.as_bytes()).into_owned()
                                }
                                AMQPValue::LongLongInt(n) => format!("i64:{n}"),
                                other => format!("{other:?}"),
                            };
                            (k.as_str().to_owned(), v)
                        })
                        .collect()
                })
                .unwrap_or_default();
            PlainProperties {
                delivery_mode: *p.delivery_mode(),
                content_type: text(p.content_type()),
                message_id: text(p.message_id()),
                job_type: text(p.kind()),
                priority: *p.priority(),
                timestamp: *p.timestamp(),
                headers,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plain::PlainProperties;
    use super::*;

    fn envelope() -> Envelope {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        let mut env = Envelope::new("send_email", "app.emails", payload);
        env.enqueued_at_ms = 1_700_000_000_999;
        env
    }

    #[test]
    fn job_properties_are_persistence_id_and_priority_only() {
        let env = envelope();
        let read = PlainProperties::read(&job_properties(&env, 7));
        assert_eq!(
            read,
            PlainProperties {
                delivery_mode: Some(2),
                content_type: None,
                message_id: Some(env.job_id.to_string()),
                job_type: None,
                priority: Some(7),
                timestamp: None,
                headers: vec![],
            }
        );
    }

    #[test]
    fn a_waited_for_job_carries_its_reply_address_and_correlation_id() {
        let mut env = envelope();
        assert_eq!(reply_to(&job_properties(&env, 0)), None);
        let to = ReplyTo::new("amq.rabbitmq.reply-to.g1h2AA", "c-1");
        env.reply_to = Some(to.clone());
        let p = job_properties(&env, 3);
        assert_eq!(reply_to(&p), Some(to));
        let held = with_due_at(p, 5);
        assert_eq!(
            held.reply_to().as_ref().map(|s| s.as_str()),
            Some("amq.rabbitmq.reply-to.g1h2AA")
        );
    }

    #[test]
    fn priority_zero_is_left_out() {
        let env = envelope();
        let read = PlainProperties::read(&job_properties(&env, 0));
        assert_eq!(read.priority, None);
        assert_eq!(read.delivery_mode, Some(2));
        assert_eq!(read.message_id, Some(env.job_id.to_string()));
    }

    #[test]
    fn dead_letter_headers_are_typed_and_only_ours() {
        let env = envelope();
        let info = DeadLetterInfo {
            died_at_ms: 1_767_225_600_000,
            ..DeadLetterInfo::now("boom", "app.emails", 3)
        };
        let read = PlainProperties::read(&with_dead_letter_headers(job_properties(&env, 0), &info));
        assert_eq!(
            read.headers,
            vec![
                ("x-attempts".to_owned(), "i64:3".to_owned()),
                ("x-death-reason".to_owned(), "boom".to_owned()),
                ("x-died-at".to_owned(), "i64:1767225600000".to_owned()),
                ("x-original-queue".to_owned(), "app.emails".to_owned()),
            ]
        );
        assert_eq!(read.delivery_mode, Some(2));
    }

    #[test]
    fn holds_carry_their_due_time_as_a_64_bit_integer() {
        let env = envelope();
        let p = with_due_at(job_properties(&env, 3), 1_700_000_000_123);
        let read = PlainProperties::read(&p);
        assert_eq!(
            read.headers,
            vec![("queuey-due-at".to_owned(), "i64:1700000000123".to_owned())]
        );
        assert_eq!(read.priority, Some(3));
        assert_eq!(read.message_id, Some(env.job_id.to_string()));
    }

    #[test]
    fn unsettled_counts_are_64_bit_integers_added_to_other_headers() {
        let env = envelope();
        let p = with_unsettled_deliveries(with_due_at(job_properties(&env, 0), 5), 2);
        let read = PlainProperties::read(&p);
        assert_eq!(
            read.headers,
            vec![
                ("queuey-due-at".to_owned(), "i64:5".to_owned()),
                ("queuey-unsettled-deliveries".to_owned(), "i64:2".to_owned()),
            ]
        );
    }

    #[test]
    fn header_values_are_never_short_strings() {
        let info = DeadLetterInfo::now("r", "q", 1);
        let p = with_dead_letter_headers(BasicProperties::default(), &info);
        for value in p.headers().as_ref().unwrap().inner().values() {
            assert!(!matches!(value, AMQPValue::ShortString(_)), "{value:?}");
        }
    }

    #[test]
    fn reasons_are_capped_on_a_char_boundary() {
        assert_eq!(cap_reason("short"), "short");
        let long = "é".repeat(3000); // 6000 bytes
        let capped = cap_reason(&long);
        assert!(capped.len() <= MAX_REASON_BYTES);
        assert!(capped.len() >= MAX_REASON_BYTES - 1);
        assert!(capped.chars().all(|c| c == 'é'));
    }

    #[test]
    fn malformed_copies_are_persistent_and_headerless_until_labelled() {
        let read = PlainProperties::read(&malformed_properties("m-1"));
        assert_eq!(read.delivery_mode, Some(2));
        assert_eq!(read.message_id.as_deref(), Some("m-1"));
        assert!(read.headers.is_empty());
    }

    #[test]
    fn short_strings_never_panic() {
        assert_eq!(short(&"é".repeat(200)).as_str().len(), 254);
        assert_eq!(short("abc").as_str(), "abc");
    }
}
