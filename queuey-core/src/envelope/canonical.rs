//! Reading an envelope laid out exactly as [`Envelope::encode`] writes it.
//!
//! The encoder writes the same keys in the same order, without whitespace:
//! `job_id`, `job_type`, `queue`, `attempt`, `enqueued_at_ms`, `deferrals`,
//! `priority`, whichever of `correlation_id`, `deadline_ms`, `traceparent`,
//! `tracestate`, `unique_key` and `tenant` are set, `errors` and `errors_cut` for a
//! job with failed attempts, and `payload` last. A body in that layout
//! without errors (retries are rare) is read here by matching the keys in
//! place, at a fraction of serde's cost.
//!
//! Anything else (another order, whitespace, an escape, a number that is
//! not a plain integer, an unknown key) makes [`read`] answer `None` for the
//! general decoder to read, so this reader only accepts bodies the general
//! decoder reads to the same fields and payload bytes (a test checks it).
//!
//! [`Envelope::encode`]: super::Envelope::encode

use serde_json::value::RawValue;
use uuid::Uuid;

use super::Wire;

/// The fields of a body in the encoder's layout; `None` for any other
/// body.
pub(super) fn read(text: &str) -> Option<Wire<'_>> {
    let mut at = Cursor { text, at: 0 };
    at.key(r#"{"job_id":"#)?;
    let job_id = Uuid::try_parse(at.string()?).ok()?;
    at.key(r#","job_type":"#)?;
    let job_type = at.string()?.to_owned();
    at.key(r#","queue":"#)?;
    let queue = at.string()?.to_owned();
    at.key(r#","attempt":"#)?;
    let attempt = u32::try_from(at.integer()?).ok()?;
    at.key(r#","enqueued_at_ms":"#)?;
    let enqueued_at_ms = at.integer()?;
    at.key(r#","deferrals":"#)?;
    let deferrals = u32::try_from(at.integer()?).ok()?;
    at.key(r#","priority":"#)?;
    let priority = u8::try_from(at.integer()?).ok()?;
    let correlation_id = at.optional_string(r#","correlation_id":"#)?;
    let deadline_ms = match at.key(r#","deadline_ms":"#) {
        Some(()) => Some(at.integer()?),
        None => None,
    };
    let traceparent = at.optional_string(r#","traceparent":"#)?;
    let tracestate = at.optional_string(r#","tracestate":"#)?;
    let unique_key = at.optional_string(r#","unique_key":"#)?;
    let tenant = at.optional_string(r#","tenant":"#)?;
    at.key(r#","payload":"#)?;
    // The payload runs to the body's closing brace. Checking it as one JSON
    // value also refuses a body with anything after the payload (another
    // key, say), which the general decoder then reads.
    let payload = at.text[at.at..].strip_suffix('}')?;
    let payload: &RawValue = serde_json::from_str(payload).ok()?;
    Some(Wire {
        job_id,
        job_type,
        queue,
        attempt,
        enqueued_at_ms,
        deferrals,
        priority,
        correlation_id,
        deadline_ms,
        traceparent,
        tracestate,
        unique_key,
        tenant,
        // A body with recorded errors has them before its payload, so it
        // never reaches here: the general decoder reads it.
        errors: Vec::new(),
        errors_cut: 0,
        payload,
    })
}

/// A position in the body.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a [u8] {
        &self.text.as_bytes()[self.at..]
    }

    /// Steps over `key` (with its punctuation) if it comes next.
    fn key(&mut self, key: &str) -> Option<()> {
        let next = self.rest().starts_with(key.as_bytes());
        next.then(|| self.at += key.len())
    }

    /// The text between the quotes of a string without escapes or control
    /// characters (UTF-8, as the body is).
    fn string(&mut self) -> Option<&'a str> {
        let rest = self.rest().strip_prefix(b"\"")?;
        let len = memchr::memchr(b'"', rest)?;
        // One pass over every byte, without a branch per byte.
        let escaped = rest[..len]
            .iter()
            .fold(false, |seen, &b| seen | (b == b'\\') | (b < 0x20));
        if escaped {
            return None;
        }
        let start = self.at + 1;
        self.at = start + len + 1;
        self.text.get(start..start + len)
    }

    /// `Some(None)` when `key` does not come next, `None` when it does but
    /// its value is not a plain string.
    fn optional_string(&mut self, key: &str) -> Option<Option<String>> {
        match self.key(key) {
            Some(()) => self.string().map(|s| Some(s.to_owned())),
            None => Some(None),
        }
    }

    /// A non-negative integer as JSON writes it (no leading zero) that fits
    /// a `u64`; the next key refuses `1.5` or `1e3`.
    fn integer(&mut self) -> Option<u64> {
        let rest = self.rest();
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        let value = if digits < MAX_U64_DIGITS {
            // Fewer digits than `u64::MAX` has cannot overflow.
            rest[..digits]
                .iter()
                .fold(0, |value: u64, &d| value * 10 + u64::from(d - b'0'))
        } else {
            rest[..digits].iter().try_fold(0, |value: u64, &d| {
                value.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })?
        };
        self.at += digits;
        Some(value)
    }
}

/// How many digits `u64::MAX` has.
const MAX_U64_DIGITS: usize = 20;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Envelope;

    /// Everything a read gives, the payload's place in the body included.
    fn fields(text: &str, wire: &Wire<'_>) -> String {
        let offset = wire.payload.get().as_ptr() as usize - text.as_ptr() as usize;
        format!(
            "{} {:?} {:?} {} {} {} {} {:?} {:?} {:?} {:?} {:?} {:?} {offset} {:?}",
            wire.job_id,
            wire.job_type,
            wire.queue,
            wire.attempt,
            wire.enqueued_at_ms,
            wire.deferrals,
            wire.priority,
            wire.correlation_id,
            wire.deadline_ms,
            wire.traceparent,
            wire.tracestate,
            wire.unique_key,
            wire.tenant,
            wire.payload.get(),
        )
    }

    /// What serde's general decoder reads from `text`.
    fn general(text: &str) -> Result<Wire<'_>, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// A string the encoder writes without an escape.
    fn plain(s: &str) -> bool {
        !s.chars().any(|c| c == '"' || c == '\\' || c < ' ')
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z._-]{0,24}",
            "[a-zé😀 /{}:,\\[\\]]{0,12}",
            any::<String>(),
            r#"[a-z"\\\t\n]{0,8}"#,
        ]
    }

    fn payload() -> impl Strategy<Value = Box<RawValue>> {
        prop_oneof![
            any::<String>().prop_map(|s| serde_json::value::to_raw_value(&s).unwrap()),
            prop::collection::vec(any::<i64>(), 0..5)
                .prop_map(|v| serde_json::value::to_raw_value(&v).unwrap()),
            Just(RawValue::from_string(r#"{ "b" : [1, 2 ,3] , "a":"\u00e9" }"#.into()).unwrap()),
            Just(RawValue::from_string("null".into()).unwrap()),
            Just(RawValue::from_string(r#"{"payload":{"}":"{"}}"#.into()).unwrap()),
        ]
    }

    prop_compose! {
        fn envelope()(
            job_type in text(),
            queue in text(),
            attempt in any::<u32>(),
            enqueued_at_ms in any::<u64>(),
            deferrals in any::<u32>(),
            priority in any::<u8>(),
            correlation_id in prop::option::of(text()),
            deadline_ms in prop::option::of(any::<u64>()),
            traceparent in prop::option::of(text()),
            tracestate in prop::option::of(text()),
            unique_key in prop::option::of(text()),
            tenant in prop::option::of(text()),
            payload in payload(),
        ) -> Envelope {
            let mut envelope = Envelope::new(job_type, queue, payload);
            envelope.attempt = attempt;
            envelope.enqueued_at_ms = enqueued_at_ms;
            envelope.deferrals = deferrals;
            envelope.priority = priority;
            envelope.correlation_id = correlation_id;
            envelope.deadline_ms = deadline_ms;
            envelope.traceparent = traceparent;
            envelope.tracestate = tracestate;
            envelope.unique_key = unique_key;
            envelope.tenant = tenant;
            envelope
        }
    }

    /// Bytes that change how a body reads when put anywhere in it.
    const EDITS: &[&str] = &[
        " ", "0", "1", ".", "e", "-", "\"", "\\", "}", ",", ":", "null", "é",
    ];

    proptest! {
        #[test]
        fn what_the_encoder_writes_reads_as_the_general_decoder_reads_it(envelope in envelope()) {
            let body = String::from_utf8(envelope.encode().unwrap()).unwrap();
            let general = general(&body).unwrap();
            let strings = [&envelope.job_type, &envelope.queue]
                .into_iter()
                .chain(envelope.correlation_id.as_ref())
                .chain(envelope.traceparent.as_ref())
                .chain(envelope.tracestate.as_ref())
                .chain(envelope.unique_key.as_ref())
                .chain(envelope.tenant.as_ref());
            let escaped = strings.into_iter().any(|s| !plain(s));
            match read(&body) {
                Some(read) => prop_assert_eq!(fields(&body, &read), fields(&body, &general)),
                None => prop_assert!(escaped, "an encoded body was left to the general decoder: {}", body),
            }
        }

        #[test]
        fn an_edited_body_is_read_as_the_general_decoder_reads_it_or_left_to_it(
            envelope in envelope(),
            at in any::<prop::sample::Index>(),
            edit in prop::sample::select(EDITS),
            remove in 0usize..3,
        ) {
            let body = String::from_utf8(envelope.encode().unwrap()).unwrap();
            let mut at = at.index(body.len() + 1);
            while !body.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + remove).min(body.len());
            while !body.is_char_boundary(end) {
                end += 1;
            }
            let edited = format!("{}{edit}{}", &body[..at], &body[end..]);
            if let Some(read) = read(&edited) {
                let general = general(&edited);
                prop_assert!(general.is_ok(), "read what the general decoder refuses: {}", edited);
                prop_assert_eq!(fields(&edited, &read), fields(&edited, &general.unwrap()));
            }
        }
    }

    #[test]
    fn a_body_in_another_layout_is_left_to_the_general_decoder() {
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let canonical = format!(
            r#"{{"job_id":"{id}","job_type":"t","queue":"q","attempt":1,"enqueued_at_ms":5,"deferrals":0,"priority":0,"payload":[1]}}"#
        );
        assert!(read(&canonical).is_some());
        for other in [
            // Written by another encoder: spaces, another order, a field
            // left out, an unknown key, a null, an escape.
            canonical.replace(r#""queue":"q""#, r#""queue": "q""#),
            format!(
                r#"{{"job_type":"t","job_id":"{id}","queue":"q","attempt":1,"enqueued_at_ms":5,"deferrals":0,"priority":0,"payload":[1]}}"#
            ),
            canonical.replace(r#","deferrals":0"#, ""),
            canonical.replace(r#","payload""#, r#","extra":1,"payload""#),
            canonical.replace(r#""payload":[1]}"#, r#""payload":[1],"extra":1}"#),
            canonical.replace(r#""priority":0"#, r#""priority":0,"correlation_id":null"#),
            canonical.replace(r#""job_type":"t""#, r#""job_type":"\u0074""#),
            // Numbers serde reads or refuses by rules of its own.
            canonical.replace(r#""attempt":1"#, r#""attempt":1.0"#),
            canonical.replace(r#""attempt":1"#, r#""attempt":01"#),
            canonical.replace(r#""priority":0"#, r#""priority":256"#),
            canonical.replace(
                r#""enqueued_at_ms":5"#,
                r#""enqueued_at_ms":18446744073709551616"#,
            ),
            // Not a payload followed by the end of the body.
            format!("{canonical} "),
            canonical.replace("[1]}", "[1}"),
        ] {
            assert!(read(&other).is_none(), "{other}");
        }
    }
}
