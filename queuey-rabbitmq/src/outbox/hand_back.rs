//! Hand-backs: a delivered job returned to the queue it came from as a new
//! message, so the broker never marks it redelivered.

use bytes::Bytes;
use lapin::BasicProperties;
use queuey_core::Envelope;

use super::publisher::Outgoing;
use crate::properties;

/// The copy of `envelope`'s job, delivered from `queue` with `original`
/// properties and `body`, to publish to `queue` again: the body as it
/// came, the properties every job carries with `priority`, and queuey's
/// own headers of the original ([`properties::carried`]), its count of
/// unsettled deliveries included, unchanged.
pub(crate) fn copy(
    queue: &str,
    envelope: &Envelope,
    original: &BasicProperties,
    priority: u8,
    body: Bytes,
) -> Outgoing {
    Outgoing {
        exchange: None,
        queue: queue.to_owned(),
        body,
        message_id: envelope.job_id.to_string(),
        properties: properties::carried(envelope, original, priority),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::plain::PlainProperties;
    use crate::topology::UNSETTLED_DELIVERIES_HEADER;
    use lapin::types::{AMQPValue, FieldTable, LongString};

    #[test]
    fn a_job_handed_back_keeps_its_body_and_its_own_headers_only() {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        let envelope = Envelope::new("t", "q", payload).with_priority(3);
        let mut headers = FieldTable::default();
        headers.insert(
            UNSETTLED_DELIVERIES_HEADER.into(),
            AMQPValue::LongLongInt(2),
        );
        headers.insert(
            "x-death".into(),
            AMQPValue::LongString(LongString::from("x")),
        );
        headers.insert(
            "CC".into(),
            AMQPValue::LongString(LongString::from("other")),
        );
        let original = BasicProperties::default()
            .with_priority(3)
            .with_headers(headers);
        let body = Bytes::from_static(b"{ \"as\": \"received\" }");
        let out = copy("q", &envelope, &original, 10, body.clone());
        assert_eq!(out.queue, "q");
        assert_eq!(out.body, body);
        assert_eq!(out.message_id, envelope.job_id.to_string());
        let read = PlainProperties::read(&out.properties);
        assert_eq!(read.priority, Some(10));
        assert_eq!(read.delivery_mode, Some(properties::PERSISTENT));
        assert_eq!(
            read.headers,
            vec![("queuey-unsettled-deliveries".to_owned(), "i64:2".to_owned())]
        );
        // Without headers of its own, none.
        let plain = copy("q", &envelope, &BasicProperties::default(), 0, body);
        assert_eq!(*plain.properties.headers(), None);
        assert_eq!(*plain.properties.priority(), None);
    }
}
