//! Dead letters: a message's last publish, into the dead-letter queue of
//! the queue it came from, saying why, where from and after how many
//! attempts.

use bytes::Bytes;
use lapin::BasicProperties;

use super::publisher::Outgoing;
use crate::properties::{self, DeadLetterInfo};
use crate::topology;

/// The dead letter of a message taken from `info.original_queue`, for that
/// queue's dead-letter queue `{queue}{suffix}`: `properties` with the
/// dead-letter headers (`x-death-reason`, cut to
/// [`MAX_REASON_BYTES`](properties::MAX_REASON_BYTES); `x-original-queue`;
/// `x-attempts`; `x-died-at`; for a malformed body `x-parse-error`) in
/// place of any others, and `body` as it was received.
pub(crate) fn letter(
    info: &DeadLetterInfo<'_>,
    suffix: &str,
    properties: BasicProperties,
    message_id: String,
    body: Bytes,
) -> Outgoing {
    Outgoing {
        exchange: None,
        queue: topology::dead_letter_queue_name(info.original_queue, suffix),
        body,
        message_id,
        properties: properties::with_dead_letter_headers(properties, info),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::plain::PlainProperties;

    #[test]
    fn a_dead_letter_says_why_where_from_and_after_how_many_attempts() {
        let body = Bytes::from_static(b"{ \"not\": \"reformatted\" }");
        let reason = "é".repeat(properties::MAX_REASON_BYTES);
        let info = DeadLetterInfo {
            parse_error: Some("expected value at line 1 column 1"),
            ..DeadLetterInfo::now(&reason, "app.emails", 3)
        };
        let base = properties::malformed_properties("m-1");
        let out = letter(&info, "-dlq", base, "m-1".to_owned(), body.clone());
        assert_eq!(out.queue, "app.emails-dlq");
        assert_eq!(out.body, body);
        assert_eq!(out.message_id, "m-1");
        let read = PlainProperties::read(&out.properties);
        assert_eq!(read.message_id.as_deref(), Some("m-1"));
        assert_eq!(read.delivery_mode, Some(properties::PERSISTENT));
        let header = |name: &str| {
            read.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let capped = header(properties::REASON_HEADER).unwrap();
        assert!(
            capped.len() <= properties::MAX_REASON_BYTES,
            "{}",
            capped.len()
        );
        assert!(reason.starts_with(&capped));
        assert_eq!(
            header(properties::ORIGINAL_QUEUE_HEADER).as_deref(),
            Some("app.emails")
        );
        assert_eq!(
            header(properties::ATTEMPTS_HEADER).as_deref(),
            Some("i64:3")
        );
        assert!(header(properties::DIED_AT_HEADER).is_some());
        assert_eq!(
            header(properties::PARSE_ERROR_HEADER).as_deref(),
            Some("expected value at line 1 column 1")
        );
        assert_eq!(read.headers.len(), 5);
    }
}
