//! Where a delivery goes, from its body and headers alone: decoding it is
//! the first step of the consumer's dispatch.
//!
//! | the delivery | goes to |
//! |---|---|
//! | a body that is not an envelope | the dead-letter queue, verbatim |
//! | redelivered, with the poison guard on | the guard (the work queue again, the suspect or dead-letter queue) |
//! | due later (its hold ended early) | its hold again, for the rest |
//! | due so far ahead it can only be garbage | the dead-letter queue |
//! | anything else | the worker |

use lapin::BasicProperties;
use queuey_core::{DecodeError, Envelope};

use super::delivery::Around;
use crate::rehold::{self, Due};

/// Where a delivery goes.
#[derive(Debug)]
pub(super) enum Route {
    /// Not an envelope; the body was left as it came, to copy verbatim.
    Malformed(DecodeError),
    /// A redelivery for the poison guard; the body was left as it came, to
    /// copy as it is.
    Guard(Envelope),
    /// A job for the worker, unless it is not due: the body was taken, and
    /// `around` keeps its bytes outside the payload (a large payload stays
    /// in the body's own memory, inside the envelope).
    Worker {
        envelope: Envelope,
        around: Around,
        due: Due,
    },
}

/// Decodes the body `data` of a delivery with `properties` and says where
/// it goes. `guarded`: the delivery came back unsettled and the poison
/// guard is on. `now_ms` reads the clock, only for a job that carries a
/// due time.
pub(super) fn route(
    data: &mut Vec<u8>,
    guarded: bool,
    properties: &BasicProperties,
    now_ms: impl FnOnce() -> u64,
) -> Route {
    if guarded {
        // The guard copies the body as it came.
        return match Envelope::decode_located(data) {
            Ok((mut envelope, _)) => {
                envelope.reply_to = crate::properties::reply_to(properties);
                Route::Guard(envelope)
            }
            Err(error) => Route::Malformed(error),
        };
    }
    match Envelope::decode_taking(std::mem::take(data)) {
        Ok((mut envelope, around, split)) => {
            // A caller's reply address rides in the properties, not the body.
            envelope.reply_to = crate::properties::reply_to(properties);
            Route::Worker {
                envelope,
                around: Around::new(around, split),
                due: rehold::due(properties, now_ms),
            }
        }
        Err((error, body)) => {
            *data = body;
            Route::Malformed(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::DUE_AT_HEADER;
    use lapin::types::{AMQPValue, FieldTable};

    const NOW: u64 = 1_700_000_000_000;

    fn job() -> Vec<u8> {
        let payload = serde_json::value::to_raw_value(&[1, 2, 3]).unwrap();
        Envelope::new("t", "q", payload).encode().unwrap()
    }

    fn due_at(ms: u64) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert(DUE_AT_HEADER.into(), AMQPValue::LongLongInt(ms as i64));
        BasicProperties::default().with_headers(headers)
    }

    #[test]
    fn garbage_is_malformed_and_kept_as_it_came() {
        for guarded in [false, true] {
            let mut data = b"not json".to_vec();
            let route = route(&mut data, guarded, &BasicProperties::default(), || NOW);
            assert!(matches!(route, Route::Malformed(_)), "{route:?}");
            assert_eq!(data, b"not json");
        }
    }

    #[test]
    fn a_guarded_redelivery_goes_to_the_guard_with_its_body() {
        let body = job();
        let mut data = body.clone();
        let route = route(&mut data, true, &due_at(NOW + 5_000), || NOW);
        assert!(matches!(route, Route::Guard(_)), "{route:?}");
        assert_eq!(data, body);
    }

    #[test]
    fn a_job_goes_to_the_worker_or_back_to_its_hold() {
        let body = job();
        let mut data = body.clone();
        let Route::Worker {
            envelope,
            around,
            due,
        } = route(&mut data, false, &BasicProperties::default(), || NOW)
        else {
            panic!("not for the worker");
        };
        assert_eq!(due, Due::Now);
        assert!(data.is_empty(), "the body was taken");
        assert_eq!(&around.rebuild(&envelope)[..], &body[..]);

        let mut data = job();
        let Route::Worker { due, .. } = route(&mut data, false, &due_at(NOW + 5_000), || NOW)
        else {
            panic!("not for the worker");
        };
        assert!(matches!(due, Due::Later { .. }), "{due:?}");
    }
}
