//! Turning an envelope into a message: everything that can fail before the
//! broker is involved.

use bytes::Bytes;
use queuey_core::{Envelope, Error, QueueConfig};

use super::publisher::Outgoing;
use crate::properties;

/// An encoded envelope, checked and ready to publish.
pub(crate) struct Prepared {
    body: Bytes,
    message_id: String,
    properties: lapin::BasicProperties,
}

impl Prepared {
    /// Encodes `envelope` and checks its size against `limit`. `declared`
    /// is the configuration of its queue, if this backend declared it: a
    /// queue declared without priorities would ignore one, so none is sent.
    pub(crate) fn new(
        envelope: &Envelope,
        limit: usize,
        declared: Option<&QueueConfig>,
    ) -> Result<Self, Error> {
        let body = envelope.encode().map_err(|source| Error::Encode {
            queue: envelope.queue.clone(),
            source,
        })?;
        crate::error::check_size(&envelope.queue, body.len(), limit)?;
        let priority = match declared {
            Some(config) if config.top_priority() == 0 => 0,
            _ => envelope.priority,
        };
        let properties = properties::job_properties(envelope, priority);
        // The message id job_properties just wrote: the job id, formatted once.
        let message_id = properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default();
        Ok(Prepared {
            body: Bytes::from(body),
            message_id,
            properties,
        })
    }

    /// The message, published to `queue`.
    pub(crate) fn outgoing(self, queue: &str) -> Outgoing {
        Outgoing {
            exchange: None,
            queue: queue.to_owned(),
            body: self.body,
            message_id: self.message_id,
            properties: self.properties,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(priority: u8) -> Envelope {
        let payload = serde_json::value::to_raw_value(&"x".repeat(100)).unwrap();
        Envelope::new("t", "q", payload).with_priority(priority)
    }

    #[test]
    fn a_queue_declared_without_priorities_gets_none() {
        let plain = QueueConfig::new("q").max_priority(0);
        let job = envelope(3);
        let out = Prepared::new(&job, 1 << 20, Some(&plain))
            .unwrap()
            .outgoing("q");
        assert_eq!(*out.properties.priority(), None);
        assert_eq!(out.message_id, job.job_id.to_string());
        let out = Prepared::new(&job, 1 << 20, None).unwrap().outgoing("q");
        assert_eq!(*out.properties.priority(), Some(3));
    }

    #[test]
    fn an_oversize_body_is_refused_with_its_size_and_the_limit() {
        let e = Prepared::new(&envelope(0), 50, None)
            .err()
            .expect("refused");
        assert!(
            matches!(e, Error::MessageTooLarge { ref queue, size, limit: 50 } if queue == "q" && size > 100),
            "{e:?}"
        );
    }
}
