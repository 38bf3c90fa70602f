//! Dead letters written straight into a dead-letter queue, with whatever
//! headers and properties a test needs (a foreign original queue, control
//! characters, a message id), and a look at what the broker holds.

use lapin::BasicProperties;
use lapin::options::BasicGetOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use queuey_core::Envelope;

use crate::tests::support::{Harness, within};

/// What one forged dead letter says about itself.
#[derive(Debug, Clone)]
pub(crate) struct Forged<'a> {
    /// The job type of the envelope (or the `type` property of a body that
    /// is not one).
    pub(crate) job_type: &'a str,
    /// `x-death-reason`.
    pub(crate) reason: &'a str,
    /// `x-original-queue`.
    pub(crate) original: &'a str,
    /// The message id property, when set.
    pub(crate) message_id: Option<&'a str>,
    /// A body that is not an envelope instead of one.
    pub(crate) malformed: bool,
    /// One more header, `(name, text)`.
    pub(crate) extra_header: Option<(&'a str, &'a str)>,
}

impl<'a> Forged<'a> {
    /// A well-formed dead letter of `original`.
    pub(crate) fn new(job_type: &'a str, reason: &'a str, original: &'a str) -> Self {
        Forged {
            job_type,
            reason,
            original,
            message_id: None,
            malformed: false,
            extra_header: None,
        }
    }
}

/// Publishes `letter` to `dead_queue`, confirmed; the job id of its
/// envelope (a fresh one for a malformed body).
pub(crate) async fn forge(h: &Harness, dead_queue: &str, letter: &Forged<'_>) -> uuid::Uuid {
    let payload = serde_json::value::to_raw_value(&serde_json::json!({ "n": 1 })).unwrap();
    let env = Envelope::new(letter.job_type, letter.original, payload);
    let body = if letter.malformed {
        b"not an envelope".to_vec()
    } else {
        env.encode().unwrap()
    };
    let mut headers = FieldTable::default();
    let text = |v: &str| AMQPValue::LongString(v.into());
    headers.insert("x-death-reason".into(), text(letter.reason));
    headers.insert("x-original-queue".into(), text(letter.original));
    if let Some((k, v)) = letter.extra_header {
        headers.insert(k.into(), text(v));
    }
    headers.insert("x-attempts".into(), AMQPValue::LongLongInt(3));
    let mut props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers);
    if let Some(id) = letter.message_id {
        props = props.with_message_id(id.into());
    }
    if letter.malformed {
        props = props.with_type(letter.job_type.into());
    }
    h.publish_raw(dead_queue, &body, props).await;
    env.job_id
}

/// Publishes `n` well-formed dead letters of `original` to `dead_queue`;
/// their job ids, oldest first.
pub(crate) async fn forge_many(
    h: &Harness,
    dead_queue: &str,
    original: &str,
    n: usize,
    reason: impl Fn(usize) -> String,
) -> Vec<uuid::Uuid> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let r = reason(i);
        ids.push(forge(h, dead_queue, &Forged::new("forged", &r, original)).await);
    }
    ids
}

/// Every message of `queue` as the broker hands it out now: its job id (or
/// message id) and whether it was delivered before. Reads with `basic.get`
/// and hands everything back by closing the channel.
pub(crate) async fn delivered_before(h: &Harness, queue: &str) -> Vec<(String, bool)> {
    let ch = h.amqp.channel().await.expect("channel");
    let mut seen = Vec::new();
    loop {
        let got = within(
            "basic.get",
            ch.basic_get(queue.into(), BasicGetOptions { no_ack: false }),
        )
        .await
        .expect("basic.get");
        let Some(message) = got else { break };
        let d = message.delivery;
        let id = match Envelope::decode(&d.data) {
            Ok(env) => env.job_id.to_string(),
            Err(_) => d
                .properties
                .message_id()
                .as_ref()
                .map(|m| m.as_str().to_owned())
                .unwrap_or_default(),
        };
        seen.push((id, d.redelivered));
    }
    let _ = ch.close(200, ShortString::default()).await;
    seen
}
