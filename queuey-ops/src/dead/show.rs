//! Everything about one dead letter, for `dead show`.

use std::ops::ControlFlow;

use lapin::types::{AMQPValue, FieldTable, ShortString};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::amqp::Amqp;
use crate::dead::{DeadLetter, DeadQueues, History};
use crate::error::{OpsError, Result};

impl DeadQueues {
    /// The first dead letter, the lane's first, that answers to `id` (a job
    /// id, a message id, or `#position` with one dead-letter queue), with its
    /// [`shard`](DeadLetter::shard), else [`OpsError::NotFound`]. The read
    /// stops there (`#N`: after N letters) or after `max` letters.
    pub(crate) async fn find(
        &self,
        amqp: &Amqp,
        id: &str,
        max: Option<usize>,
    ) -> Result<DeadLetter> {
        self.check_ids([&id.to_owned()])?;
        let position = id
            .trim()
            .strip_prefix('#')
            .and_then(|n| n.parse::<usize>().ok());
        let max = max.into_iter().chain(position).min();
        let mut found = None;
        self.scan(amqp, max, |letter| {
            if letter.answers_to(id) {
                found = Some(letter);
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
        found.ok_or_else(|| OpsError::NotFound {
            queue: self.describe(),
            id: id.to_owned(),
        })
    }
}

/// One dead letter in full.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Detail {
    pub(crate) summary: crate::dead::Summary,
    /// The message properties other than headers.
    pub(crate) properties: Map<String, Value>,
    /// The headers, as JSON.
    pub(crate) headers: Map<String, Value>,
    /// The envelope without its payload, when the body is one.
    pub(crate) envelope: Option<Value>,
    /// The payload (or, for a malformed body, the body as text or base64).
    pub(crate) payload: Value,
    /// The error of each attempt, the last one the reason it died of.
    pub(crate) history: History,
    /// Why a malformed body did not decode.
    pub(crate) parse_error: Option<String>,
}

pub(crate) fn show(letter: &DeadLetter) -> Detail {
    let p = &letter.properties;
    let mut properties = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            properties.insert(k.to_owned(), v);
        }
    };
    let text = |s: &Option<ShortString>| s.as_ref().map(|s| json!(s.as_str()));
    put("message_id", text(p.message_id()));
    put("type", text(p.kind()));
    put("content_type", text(p.content_type()));
    put("correlation_id", text(p.correlation_id()));
    put("priority", p.priority().map(|n| json!(n)));
    put("delivery_mode", p.delivery_mode().map(|n| json!(n)));
    put("timestamp", p.timestamp().map(|n| json!(n)));
    let headers = p.headers().as_ref().map(table_json).unwrap_or_default();
    let (envelope, payload) = match &letter.envelope {
        Some(env) => {
            let payload = serde_json::from_str(env.payload.get()).unwrap_or(Value::Null);
            let envelope = json!({
                "job_id": env.job_id,
                "job_type": env.job_type,
                "queue": env.queue,
                "attempt": env.attempt,
                "enqueued_at_ms": env.enqueued_at_ms,
                "deferrals": env.deferrals,
                "priority": env.priority,
                "correlation_id": env.correlation_id,
            });
            (Some(envelope), payload)
        }
        None => {
            let payload = match std::str::from_utf8(&letter.body) {
                Ok(text) => json!(text),
                Err(_) => json!({ "base64": data_encoding::BASE64.encode(&letter.body) }),
            };
            (None, payload)
        }
    };
    Detail {
        summary: letter.summary(),
        properties,
        headers,
        envelope,
        payload,
        history: letter.history(),
        parse_error: letter.parse_error(),
    }
}

/// An AMQP value as JSON, for reading (types are not kept; exports keep them).
pub(crate) fn amqp_value_to_json(value: &AMQPValue) -> Value {
    match value {
        AMQPValue::Boolean(b) => json!(b),
        AMQPValue::ShortShortInt(n) => json!(n),
        AMQPValue::ShortShortUInt(n) => json!(n),
        AMQPValue::ShortInt(n) => json!(n),
        AMQPValue::ShortUInt(n) => json!(n),
        AMQPValue::LongInt(n) => json!(n),
        AMQPValue::LongUInt(n) => json!(n),
        AMQPValue::LongLongInt(n) => json!(n),
        AMQPValue::Float(n) => json!(n),
        AMQPValue::Double(n) => json!(n),
        AMQPValue::DecimalValue(d) => json!(format!("{d:?}")),
        AMQPValue::ShortString(s) => json!(s.as_str()),
        AMQPValue::LongString(s) => json!(String::from_utf8_lossy(s.as_bytes())),
        AMQPValue::FieldArray(a) => {
            Value::Array(a.as_slice().iter().map(amqp_value_to_json).collect())
        }
        AMQPValue::Timestamp(t) => json!(t),
        AMQPValue::FieldTable(t) => Value::Object(table_json(t)),
        AMQPValue::ByteArray(b) => json!({ "base64": data_encoding::BASE64.encode(b.as_slice()) }),
        AMQPValue::Void => Value::Null,
    }
}

/// A field table as a JSON object.
fn table_json(table: &FieldTable) -> Map<String, Value> {
    (table.inner().iter())
        .map(|(k, v)| (k.as_str().to_owned(), amqp_value_to_json(v)))
        .collect()
}
