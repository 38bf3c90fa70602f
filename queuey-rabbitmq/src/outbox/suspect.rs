//! Suspect copies: a job that came back unsettled, republished to its work
//! queue's suspect queue with its count of unsettled deliveries.

use bytes::Bytes;
use lapin::BasicProperties;
use queuey_core::Envelope;

use super::publisher::Outgoing;
use crate::{properties, topology};

/// The copy of `envelope`'s job, delivered from the work queue `queue` (or
/// its suspect queue) with `original` properties and `body`, for the
/// suspect queue `{queue}{suffix}`: the body as it came, the properties
/// every job carries and queuey's own headers of the original
/// ([`properties::carried`]), and the count of unsettled deliveries.
pub(crate) fn copy(
    queue: &str,
    envelope: &Envelope,
    original: &BasicProperties,
    suffix: &str,
    count: u32,
    body: Bytes,
) -> Outgoing {
    Outgoing {
        exchange: None,
        queue: topology::suspect_queue_name(queue, suffix),
        body,
        message_id: envelope.job_id.to_string(),
        // No priority: a suspect queue has none.
        properties: properties::with_unsettled_deliveries(
            properties::carried(envelope, original, 0),
            count,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::plain::PlainProperties;
    use lapin::types::{AMQPValue, FieldTable, LongString};

    #[test]
    fn suspects_carry_the_job_id_persistence_and_queueys_own_headers_only() {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        let envelope = Envelope::new("t", "q", payload);
        let mut headers = FieldTable::default();
        headers.insert("queuey-due-at".into(), AMQPValue::LongLongInt(9));
        headers.insert(
            "x-death".into(),
            AMQPValue::LongString(LongString::from("x")),
        );
        headers.insert(
            topology::UNSETTLED_DELIVERIES_HEADER.into(),
            AMQPValue::LongLongInt(1),
        );
        let original = BasicProperties::default()
            .with_priority(4)
            .with_headers(headers);
        let body = Bytes::from_static(b"{}");
        let out = copy("q", &envelope, &original, ".suspect", 2, body);
        assert_eq!(out.queue, "q.suspect");
        assert_eq!(out.message_id, envelope.job_id.to_string());
        let read = PlainProperties::read(&out.properties);
        assert_eq!(read.message_id, Some(envelope.job_id.to_string()));
        assert_eq!(read.delivery_mode, Some(2));
        assert_eq!(read.priority, None);
        assert_eq!(
            read.headers,
            vec![
                ("queuey-due-at".to_owned(), "i64:9".to_owned()),
                ("queuey-unsettled-deliveries".to_owned(), "i64:2".to_owned()),
            ]
        );
    }
}
