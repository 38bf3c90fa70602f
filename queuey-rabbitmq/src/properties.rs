//! Message properties and headers, built from scratch for every publish.
//!
//! Nothing is copied from a delivery's properties or headers into a
//! republish, so broker bookkeeping (`x-death`, `x-first-death-*`,
//! `x-last-death-*`) and sender-selected routing (`CC`, `BCC`) never travel
//! on.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use queuey_core::{Envelope, Error};

/// Delivery mode of a persistent message.
pub(crate) const PERSISTENT: u8 = 2;
/// Content type of every envelope.
pub(crate) const CONTENT_TYPE: &str = "application/json";
/// Longest `x-death-reason` value, in bytes; the properties must fit in one
/// frame, and a reason is a label, not a log.
pub(crate) const MAX_REASON_BYTES: usize = 4096;

pub(crate) const REASON_HEADER: &str = "x-death-reason";
pub(crate) const ORIGINAL_QUEUE_HEADER: &str = "x-original-queue";
pub(crate) const ATTEMPTS_HEADER: &str = "x-attempts";

/// The properties of an envelope: persistent JSON, its job id and type, its
/// priority, and when it was first enqueued (whole seconds).
pub(crate) fn job_properties(envelope: &Envelope) -> Result<BasicProperties, Error> {
    let job_type = ShortString::try_new(envelope.job_type.as_str()).map_err(|_| {
        Error::invalid_config(format!(
            "job type `{}` is {} bytes, over the 255-byte AMQP limit for the message type",
            envelope.job_type,
            envelope.job_type.len()
        ))
    })?;
    let mut id = uuid::Uuid::encode_buffer();
    Ok(BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_content_type(short(CONTENT_TYPE))
        .with_message_id(short(envelope.job_id.hyphenated().encode_lower(&mut id)))
        .with_type(job_type)
        .with_priority(envelope.priority)
        .with_timestamp(envelope.enqueued_at_ms / 1000))
}

/// What a dead letter records about why and where it died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeadLetterInfo<'a> {
    pub(crate) reason: &'a str,
    pub(crate) original_queue: &'a str,
    pub(crate) attempts: u32,
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
    properties.with_headers(headers)
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
    if reason.len() <= MAX_REASON_BYTES {
        return reason;
    }
    let mut end = MAX_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// A short string from text this crate controls or checked to fit; longer
/// text is cut on a character boundary rather than panicking.
pub(crate) fn short(s: &str) -> ShortString {
    let mut end = s.len().min(255);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    ShortString::try_new(&s[..end]).unwrap_or_default()
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// The properties of a message as plain values, read back from the wire.
#[cfg(test)]
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

#[cfg(test)]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> Envelope {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        let mut env = Envelope::new("send_email", "app.emails", payload);
        env.enqueued_at_ms = 1_700_000_000_999;
        env
    }

    #[test]
    fn job_properties_round_trip() {
        let env = envelope();
        let read = PlainProperties::read(&job_properties(&env.clone().with_priority(7)).unwrap());
        assert_eq!(
            read,
            PlainProperties {
                delivery_mode: Some(2),
                content_type: Some("application/json".into()),
                message_id: Some(env.job_id.to_string()),
                job_type: Some("send_email".into()),
                priority: Some(7),
                timestamp: Some(1_700_000_000),
                headers: vec![],
            }
        );
    }

    #[test]
    fn a_job_type_too_long_for_amqp_is_an_error() {
        let mut env = envelope();
        env.job_type = "t".repeat(256);
        let e = job_properties(&env).unwrap_err();
        assert!(e.to_string().contains("256 bytes"), "{e}");
    }

    #[test]
    fn dead_letter_headers_are_typed_and_only_ours() {
        let env = envelope();
        let info = DeadLetterInfo {
            reason: "boom",
            original_queue: "app.emails",
            attempts: 3,
        };
        let read = PlainProperties::read(&with_dead_letter_headers(
            job_properties(&env).unwrap(),
            &info,
        ));
        assert_eq!(
            read.headers,
            vec![
                ("x-attempts".to_owned(), "i64:3".to_owned()),
                ("x-death-reason".to_owned(), "boom".to_owned()),
                ("x-original-queue".to_owned(), "app.emails".to_owned()),
            ]
        );
        assert_eq!(read.delivery_mode, Some(2));
    }

    #[test]
    fn header_values_are_never_short_strings() {
        let info = DeadLetterInfo {
            reason: "r",
            original_queue: "q",
            attempts: 1,
        };
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
