//! The JSON envelope every job travels in.

mod canonical;
mod history;
mod reply_to;

pub use history::{AttemptError, MAX_ERROR_BYTES, MAX_RECORDED_ERRORS};
pub use reply_to::ReplyTo;

use std::fmt;
use std::ops::Range;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::clock::now_ms;

/// The largest message body queuey encodes or decodes: 16 MiB, RabbitMQ 4's
/// default `max_message_size`.
///
/// Bodies above it are refused before they are parsed or published.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A job on the wire: its identity, its bookkeeping, and the job itself as
/// raw JSON.
///
/// The envelope, not any broker header, is the source of truth for attempts
/// and deferrals. The payload stays raw JSON from decode to re-publish, so
/// retrying, deferring or dead-lettering a job never re-encodes it.
///
/// Fields are only ever added, each with `#[serde(default)]`, so an older
/// worker and a newer producer can share a queue. The struct is
/// `#[non_exhaustive]`; build one with [`Envelope::new`].
///
/// ```
/// use queuey_core::Envelope;
///
/// let payload = serde_json::value::to_raw_value(&serde_json::json!({"to": "a@b.c"}))?;
/// let env = Envelope::new("send_email", "app.emails", payload);
/// assert_eq!(env.attempt, 1);
///
/// let bytes = env.encode()?;
/// let back = Envelope::decode(&bytes)?;
/// assert_eq!(back, env);
///
/// let retry = back.next_attempt();
/// assert_eq!((retry.attempt, retry.priority), (2, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Envelope {
    /// Unique id of the job, kept across retries and deferrals.
    pub job_id: Uuid,
    /// The job's type name (`Job::NAME`), which selects its handler.
    pub job_type: String,
    /// The queue the job belongs to.
    pub queue: String,
    /// The attempt this delivery is, starting at 1.
    pub attempt: u32,
    /// When the job was first enqueued, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub enqueued_at_ms: u64,
    /// How many times the job was deferred (deferrals spend no attempt).
    #[serde(default)]
    pub deferrals: u32,
    /// The priority the message was published with.
    #[serde(default)]
    pub priority: u8,
    /// An id tying the job to whatever caused it, for tracing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// When the job stops being worth running (ms since the Unix epoch):
    /// taken, or due back, after it, it is dead-lettered as `deadline passed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// The W3C `traceparent` of the span that enqueued the job (see
    /// [`trace_context`](crate::trace_context)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that goes with [`traceparent`](Envelope::traceparent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// The store key this job holds as a unique job (see
    /// [`Unique`](crate::Unique)); the worker gives it back when the job is
    /// done for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// The tenant the job belongs to, when it names one (see
    /// [`EnqueueOptions::tenant`](crate::EnqueueOptions::tenant)): on a
    /// sharded queue it picks the shard, and workers share their turns
    /// between tenants by weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The errors of the job's earlier failed attempts, oldest first, at
    /// most [`MAX_RECORDED_ERRORS`] (see [`record_error`](Envelope::record_error)).
    /// Empty, it is not written at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<AttemptError>,
    /// How many older errors were left out of [`errors`](Envelope::errors)
    /// to keep it bounded. Zero, it is not written at all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors_cut: u32,
    /// Where the job's final outcome goes, when a caller waits for it
    /// (see [`Replies::request`](crate::backend::Replies::request)).
    ///
    /// Not part of the JSON: the backend carries it beside the body
    /// (RabbitMQ: `reply_to` and `correlation_id` properties), unchanged
    /// through every retry, deferral, hold and dead letter.
    #[serde(skip)]
    pub reply_to: Option<ReplyTo>,
    /// The job itself, as the raw JSON it was encoded to.
    pub payload: Box<RawValue>,
}

/// An envelope as decoded from a body, its payload borrowed from it. The
/// same fields and defaults as [`Envelope`].
#[derive(Deserialize)]
struct Wire<'a> {
    job_id: Uuid,
    job_type: String,
    queue: String,
    attempt: u32,
    #[serde(default)]
    enqueued_at_ms: u64,
    #[serde(default)]
    deferrals: u32,
    #[serde(default)]
    priority: u8,
    #[serde(default)]
    correlation_id: Option<String>,
    #[serde(default)]
    deadline_ms: Option<u64>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(default)]
    tracestate: Option<String>,
    #[serde(default)]
    unique_key: Option<String>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    errors: Vec<AttemptError>,
    #[serde(default)]
    errors_cut: u32,
    #[serde(borrow)]
    payload: &'a RawValue,
}

impl<'a> Wire<'a> {
    /// Parses a body, and says where in it the payload is.
    fn parse(body: &'a [u8]) -> Result<(Wire<'a>, Range<usize>), DecodeError> {
        if body.len() > MAX_MESSAGE_BYTES {
            return Err(DecodeError::TooLarge {
                size: body.len(),
                limit: MAX_MESSAGE_BYTES,
            });
        }
        // One UTF-8 check of the whole body, not one per borrowed string (the
        // byte parser says where a non-UTF-8 body fails). A body in queuey's
        // own layout is read in place, any other by serde.
        let wire: Result<Wire<'_>, _> = match std::str::from_utf8(body) {
            Ok(text) => match canonical::read(text) {
                Some(wire) => Ok(wire),
                None => serde_json::from_str(text),
            },
            Err(_) => serde_json::from_slice(body),
        };
        let wire = wire.map_err(DecodeError::Json)?;
        if wire.attempt == 0 {
            return Err(DecodeError::Invalid(
                "attempt is 0, but attempts count from 1",
            ));
        }
        // The borrowed payload points into `body`: its offset is where it is.
        let raw = wire.payload.get();
        let start = (raw.as_ptr() as usize).saturating_sub(body.as_ptr() as usize);
        let range = start..start + raw.len();
        Ok((wire, range))
    }

    fn into_envelope(self, payload: Box<RawValue>) -> Envelope {
        Envelope {
            job_id: self.job_id,
            job_type: self.job_type,
            queue: self.queue,
            attempt: self.attempt,
            enqueued_at_ms: self.enqueued_at_ms,
            deferrals: self.deferrals,
            priority: self.priority,
            correlation_id: self.correlation_id,
            deadline_ms: self.deadline_ms,
            traceparent: self.traceparent,
            tracestate: self.tracestate,
            unique_key: self.unique_key,
            tenant: self.tenant,
            errors: self.errors,
            errors_cut: self.errors_cut,
            reply_to: None,
            payload,
        }
    }
}

/// Payloads of this many bytes or more stay in the received body's
/// allocation in [`Envelope::decode_taking`] (smaller ones are copied:
/// cheaper than a second check).
pub const IN_PLACE_PAYLOAD_BYTES: usize = 4 * 1024;

/// Room for an encoded envelope's names, punctuation and fixed-size values
/// (under 200 bytes), so that [`Envelope::encode`] allocates once.
const ENCODED_FIELDS_BYTES: usize = 256;

/// Room for one recorded error's field names, punctuation and numbers.
const ENCODED_ERROR_BYTES: usize = 64;

/// Whether a count is zero, to leave it out of the JSON.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Envelope {
    /// A first attempt of a new job with a fresh id, enqueued now, priority 0.
    pub fn new(
        job_type: impl Into<String>,
        queue: impl Into<String>,
        payload: Box<RawValue>,
    ) -> Self {
        Envelope {
            job_id: Uuid::new_v4(),
            job_type: job_type.into(),
            queue: queue.into(),
            attempt: 1,
            enqueued_at_ms: now_ms(),
            deferrals: 0,
            priority: 0,
            correlation_id: None,
            deadline_ms: None,
            traceparent: None,
            tracestate: None,
            unique_key: None,
            tenant: None,
            errors: Vec::new(),
            errors_cut: 0,
            reply_to: None,
            payload,
        }
    }

    /// Sets the priority.
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the correlation id.
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// Sets the deadline, in milliseconds since the Unix epoch.
    pub fn with_deadline_ms(mut self, deadline_ms: u64) -> Self {
        self.deadline_ms = Some(deadline_ms);
        self
    }

    /// The envelope for the next attempt after a failure: attempt + 1,
    /// priority 0 (a retry joins the back of the queue), deferrals kept.
    pub fn next_attempt(&self) -> Envelope {
        Envelope {
            attempt: self.attempt.saturating_add(1),
            priority: 0,
            ..self.clone()
        }
    }

    /// The envelope for a deferral: attempt unchanged, deferrals + 1, and the
    /// queue's top priority so it returns ahead of the backlog.
    pub fn deferred(&self, top_priority: u8) -> Envelope {
        Envelope {
            deferrals: self.deferrals.saturating_add(1),
            priority: top_priority,
            ..self.clone()
        }
    }

    /// The envelope aimed at `queue`: a retry or deferral goes back to the
    /// queue it was consumed from, whatever queue the message names.
    pub fn for_queue(mut self, queue: &str) -> Envelope {
        if self.queue != queue {
            self.queue = queue.to_owned();
        }
        self
    }

    /// Decodes the payload as a job.
    pub fn payload_as<J: DeserializeOwned>(&self) -> Result<J, serde_json::Error> {
        serde_json::from_str(self.payload.get())
    }

    /// Encodes the envelope as JSON.
    pub fn encode(&self) -> Result<Vec<u8>, serde_json::Error> {
        // Sized up front, so the buffer (and payload) is never copied again.
        let capacity = ENCODED_FIELDS_BYTES
            + self.job_type.len()
            + self.queue.len()
            + self.correlation_id.as_ref().map_or(0, String::len)
            + self.traceparent.as_ref().map_or(0, String::len)
            + self.tracestate.as_ref().map_or(0, String::len)
            + self.unique_key.as_ref().map_or(0, String::len)
            + self.tenant.as_ref().map_or(0, String::len)
            + self
                .errors
                .iter()
                .map(|e| e.error.len() + ENCODED_ERROR_BYTES)
                .sum::<usize>()
            + self.payload.get().len();
        let mut body = Vec::with_capacity(capacity);
        serde_json::to_writer(&mut body, self)?;
        Ok(body)
    }

    /// Decodes a message body.
    ///
    /// Arbitrary bytes give an error, never a panic: a body over
    /// [`MAX_MESSAGE_BYTES`] is refused unparsed, nesting past serde_json's
    /// recursion limit is an error, and so is an attempt of 0.
    pub fn decode(body: &[u8]) -> Result<Envelope, DecodeError> {
        Self::decode_located(body).map(|(envelope, _)| envelope)
    }

    /// Decodes a message body like [`decode`](Self::decode), and also says
    /// where in `body` the payload's bytes are.
    ///
    /// `body[..range.start]`, the payload and `body[range.end..]` are the
    /// body again, byte for byte, so a consumer can keep only the bytes
    /// around the payload to copy the message verbatim later (a dead letter).
    ///
    /// ```
    /// use queuey_core::Envelope;
    ///
    /// let payload = serde_json::value::to_raw_value(&[1, 2, 3])?;
    /// let body = Envelope::new("t", "q", payload).encode()?;
    /// let (env, at) = Envelope::decode_located(&body)?;
    /// assert_eq!(&body[at.clone()], env.payload.get().as_bytes());
    /// let mut again = body[..at.start].to_vec();
    /// again.extend_from_slice(env.payload.get().as_bytes());
    /// again.extend_from_slice(&body[at.end..]);
    /// assert_eq!(again, body);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decode_located(body: &[u8]) -> Result<(Envelope, Range<usize>), DecodeError> {
        let (wire, range) = Wire::parse(body)?;
        let payload = wire.payload.to_owned();
        Ok((wire.into_envelope(payload), range))
    }

    /// Decodes a body it takes, like [`decode_located`](Self::decode_located):
    /// the envelope, the body without its payload, and the offset it was cut
    /// at. A payload of [`IN_PLACE_PAYLOAD_BYTES`] or more stays in the
    /// body's allocation (moved to its front, checked again as JSON), so a
    /// large job is never held twice. On error the body is handed back.
    ///
    /// ```
    /// use queuey_core::Envelope;
    ///
    /// let payload = serde_json::value::to_raw_value(&"x".repeat(5_000))?;
    /// let body = Envelope::new("t", "q", payload).encode()?;
    /// let (env, around, split) = Envelope::decode_taking(body.clone()).unwrap();
    /// let mut again = around[..split].to_vec();
    /// again.extend_from_slice(env.payload.get().as_bytes());
    /// again.extend_from_slice(&around[split..]);
    /// assert_eq!(again, body);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn decode_taking(
        body: Vec<u8>,
    ) -> Result<(Envelope, Vec<u8>, usize), (DecodeError, Vec<u8>)> {
        let (wire, range) = match Wire::parse(&body) {
            Ok(parsed) => parsed,
            Err(e) => return Err((e, body)),
        };
        let mut around = Vec::with_capacity(body.len() - range.len());
        around.extend_from_slice(&body[..range.start]);
        around.extend_from_slice(&body[range.end..]);
        let split = range.start;
        if range.len() < IN_PLACE_PAYLOAD_BYTES {
            let payload = wire.payload.to_owned();
            return Ok((wire.into_envelope(payload), around, split));
        }
        // The fields the envelope keeps are owned; the payload is placed
        // once the body is no longer borrowed.
        let envelope = wire.into_envelope(RawValue::NULL.to_owned());
        let mut payload = body;
        payload.truncate(range.end);
        payload.drain(..range.start);
        // Both checks pass (the parser took these bytes as UTF-8 JSON). Were
        // one to fail, the body goes back: whole for UTF-8, without its
        // payload for JSON, which consumes the text.
        let text = match String::from_utf8(payload) {
            Ok(text) => text,
            Err(e) => {
                let mut body = around[..split].to_vec();
                body.extend_from_slice(e.as_bytes());
                body.extend_from_slice(&around[split..]);
                return Err((DecodeError::Invalid("the payload is not UTF-8"), body));
            }
        };
        match RawValue::from_string(text) {
            Ok(raw) => Ok((
                Envelope {
                    payload: raw,
                    ..envelope
                },
                around,
                split,
            )),
            Err(_) => Err((
                DecodeError::Invalid("the payload did not decode a second time"),
                around,
            )),
        }
    }

    /// Milliseconds since the job was first enqueued (0 if the clock is
    /// behind the producer's).
    pub fn age_ms(&self) -> u64 {
        now_ms().saturating_sub(self.enqueued_at_ms)
    }
}

impl PartialEq for Envelope {
    fn eq(&self, other: &Self) -> bool {
        self.job_id == other.job_id
            && self.job_type == other.job_type
            && self.queue == other.queue
            && self.attempt == other.attempt
            && self.enqueued_at_ms == other.enqueued_at_ms
            && self.deferrals == other.deferrals
            && self.priority == other.priority
            && self.correlation_id == other.correlation_id
            && self.deadline_ms == other.deadline_ms
            && self.traceparent == other.traceparent
            && self.tracestate == other.tracestate
            && self.unique_key == other.unique_key
            && self.tenant == other.tenant
            && self.errors == other.errors
            && self.errors_cut == other.errors_cut
            && self.reply_to == other.reply_to
            && self.payload.get() == other.payload.get()
    }
}

impl Eq for Envelope {}

impl fmt::Debug for Envelope {
    // The payload may hold personal data; print its size, not its contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Envelope")
            .field("job_id", &self.job_id)
            .field("job_type", &self.job_type)
            .field("queue", &self.queue)
            .field("attempt", &self.attempt)
            .field("enqueued_at_ms", &self.enqueued_at_ms)
            .field("deferrals", &self.deferrals)
            .field("priority", &self.priority)
            .field("correlation_id", &self.correlation_id)
            .field("deadline_ms", &self.deadline_ms)
            .field("traceparent", &self.traceparent)
            // A caller's key may name a person; say only that there is one.
            .field("unique", &self.unique_key.is_some())
            .field("tenant", &self.tenant)
            // An error's text may quote the job; say how many there are.
            .field("errors", &self.errors.len())
            .field("errors_cut", &self.errors_cut)
            .field("reply_to", &self.reply_to)
            .field("payload_bytes", &self.payload.get().len())
            .finish()
    }
}

/// Why a message body is not an [`Envelope`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body is larger than [`MAX_MESSAGE_BYTES`]; it was not parsed.
    #[error("the body is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The body is not JSON of the envelope's shape.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// The body parsed but a value is out of range.
    #[error("{0}")]
    Invalid(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Envelope {
        let payload =
            serde_json::value::to_raw_value(&serde_json::json!({"n": 1, "s": "x"})).unwrap();
        Envelope::new("t", "q", payload)
            .with_priority(3)
            .with_correlation_id("c-1")
    }

    #[test]
    fn round_trip_keeps_every_field_and_the_raw_payload() {
        let mut env = sample();
        env.attempt = 4;
        env.deferrals = 2;
        let back = Envelope::decode(&env.encode().unwrap()).unwrap();
        assert_eq!(back, env);
        assert_eq!(back.payload.get(), r#"{"n":1,"s":"x"}"#);
    }

    #[test]
    fn a_body_that_does_not_decode_is_handed_back_untouched() {
        for body in [&b"not json {\xff"[..], br#"{"payload":1,"attempt":0}"#] {
            let (_, back) = Envelope::decode_taking(body.to_vec()).unwrap_err();
            assert_eq!(back, body);
        }
    }

    #[test]
    fn a_taken_body_decodes_as_the_borrowed_one_either_side_of_the_in_place_size() {
        for size in [10, IN_PLACE_PAYLOAD_BYTES, 3 * IN_PLACE_PAYLOAD_BYTES] {
            let payload = serde_json::value::to_raw_value(&"é".repeat(size / 2)).unwrap();
            let body = Envelope::new("t", "q", payload).encode().unwrap();
            let (borrowed, at) = Envelope::decode_located(&body).unwrap();
            let (taken, around, split) = Envelope::decode_taking(body.clone()).unwrap();
            assert_eq!(taken, borrowed);
            assert_eq!(split, at.start);
            assert_eq!(around.len(), body.len() - at.len());
        }
    }

    #[test]
    fn the_located_payload_rebuilds_the_body_verbatim() {
        let odd = br#"{ "payload" : { "b" : [1, 2 ,3] , "a":"\u00e9" }, "job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q","attempt":2,"extra":1 }"#;
        let (env, at) = Envelope::decode_located(odd).unwrap();
        assert_eq!(&odd[at.clone()], env.payload.get().as_bytes());
        let mut again = odd[..at.start].to_vec();
        again.extend_from_slice(env.payload.get().as_bytes());
        again.extend_from_slice(&odd[at.end..]);
        assert_eq!(again, odd.to_vec());
        // The same envelope as serde's own decoding.
        let via_serde: Envelope = serde_json::from_slice(odd).unwrap();
        assert_eq!(env, via_serde);
        assert_eq!(env.attempt, 2);
    }

    #[test]
    fn payload_is_not_reformatted() {
        let body = br#"{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q","attempt":1,"payload":{ "b" : [1, 2],  "a":null }}"#;
        let env = Envelope::decode(body).unwrap();
        assert_eq!(env.payload.get(), r#"{ "b" : [1, 2],  "a":null }"#);
        let again = Envelope::decode(&env.encode().unwrap()).unwrap();
        assert_eq!(again.payload.get(), env.payload.get());
    }

    #[test]
    fn fields_added_later_default_when_missing() {
        let body = br#"{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q","attempt":2,"payload":1}"#;
        let env = Envelope::decode(body).unwrap();
        assert_eq!((env.deferrals, env.priority, env.enqueued_at_ms), (0, 0, 0));
        assert_eq!(env.correlation_id, None);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let body = br#"{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q","attempt":1,"payload":{},"from_the_future":true}"#;
        assert!(Envelope::decode(body).is_ok());
    }

    #[test]
    fn deadline_and_trace_context_survive_encoding() {
        let mut env = sample().with_deadline_ms(1_700_000_000_000);
        env.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
        env.tracestate = Some("vendor=value".into());
        let back = Envelope::decode(&env.encode().unwrap()).unwrap();
        assert_eq!(back, env);
        assert_eq!(back.deadline_ms, Some(1_700_000_000_000));
        // Retries and deferrals keep them.
        assert_eq!(back.next_attempt().deferred(3).traceparent, env.traceparent);
        assert_eq!(back.next_attempt().deadline_ms, env.deadline_ms);
        // Absent, they are not written at all.
        let plain = String::from_utf8(sample().encode().unwrap()).unwrap();
        assert!(
            !plain.contains("deadline") && !plain.contains("trace"),
            "{plain}"
        );
    }

    #[test]
    fn next_attempt_and_deferred() {
        let env = sample();
        let next = env.next_attempt();
        assert_eq!((next.attempt, next.priority, next.deferrals), (2, 0, 0));
        assert_eq!(next.job_id, env.job_id);
        let deferred = next.deferred(10);
        assert_eq!(
            (deferred.attempt, deferred.priority, deferred.deferrals),
            (2, 10, 1)
        );
        assert_eq!(deferred.deferred(10).next_attempt().deferrals, 2);
    }

    #[test]
    fn for_queue_retargets_only_when_needed() {
        let env = sample();
        assert_eq!(env.clone().for_queue("q"), env);
        let moved = env.clone().for_queue("other");
        assert_eq!(moved.queue, "other");
        assert_eq!(moved.job_id, env.job_id);
    }

    #[test]
    fn counters_saturate() {
        let mut env = sample();
        env.attempt = u32::MAX;
        env.deferrals = u32::MAX;
        assert_eq!(env.next_attempt().attempt, u32::MAX);
        assert_eq!(env.deferred(1).deferrals, u32::MAX);
    }

    #[test]
    fn bad_bodies_are_errors_not_panics() {
        let valid_prefix =
            r#"{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q","#;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("not json", b"not json {".to_vec()),
            ("json scalar", b"42".to_vec()),
            ("json array", b"[1,2,3]".to_vec()),
            ("wrong shape", br#"{"hello":"world"}"#.to_vec()),
            (
                "missing payload",
                format!(r#"{valid_prefix}"attempt":1}}"#).into_bytes(),
            ),
            (
                "attempt is a string",
                format!(r#"{valid_prefix}"attempt":"1","payload":1}}"#).into_bytes(),
            ),
            (
                "attempt is negative",
                format!(r#"{valid_prefix}"attempt":-1,"payload":1}}"#).into_bytes(),
            ),
            (
                "attempt overflows",
                format!(r#"{valid_prefix}"attempt":99999999999999999999999,"payload":1}}"#)
                    .into_bytes(),
            ),
            (
                "attempt is zero",
                format!(r#"{valid_prefix}"attempt":0,"payload":1}}"#).into_bytes(),
            ),
            (
                "priority overflows",
                format!(r#"{valid_prefix}"attempt":1,"priority":256,"payload":1}}"#).into_bytes(),
            ),
            (
                "huge float",
                format!(r#"{valid_prefix}"attempt":1e400,"payload":1}}"#).into_bytes(),
            ),
            (
                "bad uuid",
                br#"{"job_id":"nope","job_type":"t","queue":"q","attempt":1,"payload":1}"#.to_vec(),
            ),
            ("invalid utf-8", b"{\"job_id\":\"\xff\xfe\"}".to_vec()),
            (
                "invalid utf-8 in a string",
                format!(r#"{valid_prefix}"attempt":1,"payload":"#)
                    .into_bytes()
                    .into_iter()
                    .chain(*b"\"\xc3\x28\"}")
                    .collect(),
            ),
            (
                "truncated",
                format!(r#"{valid_prefix}"attempt":1,"payload":{{"a":"#).into_bytes(),
            ),
            ("deep nesting", "[".repeat(100_000).into_bytes()),
        ];
        for (name, body) in cases {
            assert!(Envelope::decode(&body).is_err(), "{name} decoded");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_in_a_field_the_envelope_ignores_decode_as_before() {
        // The whole body is checked for UTF-8 once; a body that fails goes
        // to the byte parser, which (as before that check) only refuses
        // bytes that end up in the envelope.
        let mut body = br#"{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","note":""#.to_vec();
        body.extend_from_slice(b"\xff\xfe");
        body.extend_from_slice(br#"","job_type":"t","queue":"q","attempt":1,"payload":[1]}"#);
        let (envelope, at) = Envelope::decode_located(&body).unwrap();
        assert_eq!(envelope.payload.get(), "[1]");
        assert_eq!(&body[at], b"[1]");
    }

    #[test]
    fn deep_nesting_in_the_payload_is_kept_raw_and_refused_when_read() {
        // The raw payload is skipped without recursion, so even a million
        // levels cannot overflow the stack; reading it as a job then hits
        // serde_json's recursion limit.
        let depth = 1_000_000;
        let body = format!(
            r#"{{"job_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","job_type":"t","queue":"q","attempt":1,"payload":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let env = Envelope::decode(body.as_bytes()).unwrap();
        let err = env.payload_as::<serde_json::Value>().unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn ten_megabyte_garbage_is_an_error() {
        let body = vec![b'x'; 10 * 1024 * 1024];
        assert!(matches!(Envelope::decode(&body), Err(DecodeError::Json(_))));
        let mut nested = vec![b'{'; 10 * 1024 * 1024];
        nested[0] = b'{';
        assert!(Envelope::decode(&nested).is_err());
    }

    #[test]
    fn ten_megabyte_payload_is_fine_and_oversize_is_refused_before_parsing() {
        let big = "a".repeat(10 * 1024 * 1024);
        let payload = serde_json::value::to_raw_value(&big).unwrap();
        let env = Envelope::new("t", "q", payload);
        let back = Envelope::decode(&env.encode().unwrap()).unwrap();
        assert_eq!(back.payload.get().len(), big.len() + 2);

        let oversize = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert!(matches!(
            Envelope::decode(&oversize),
            Err(DecodeError::TooLarge { size, .. }) if size == MAX_MESSAGE_BYTES + 1
        ));
    }

    #[test]
    fn debug_hides_the_payload() {
        let payload = serde_json::value::to_raw_value("secret-token").unwrap();
        let env = Envelope::new("t", "q", payload);
        let text = format!("{env:?}");
        assert!(!text.contains("secret-token"), "{text}");
        assert!(text.contains("payload_bytes"), "{text}");
    }

    #[test]
    fn payload_as_decodes_the_job() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct J {
            n: u32,
            s: String,
        }
        let j: J = sample().payload_as().unwrap();
        assert_eq!(
            j,
            J {
                n: 1,
                s: "x".into()
            }
        );
        assert!(sample().payload_as::<Vec<u8>>().is_err());
    }
}
