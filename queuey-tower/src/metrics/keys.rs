//! The metric keys of one queue and job type, built once and reused for
//! every job: building a key (its label set) costs more than recording.

use std::sync::{Arc, Mutex};

use metrics::{Key, Label, Level, Metadata, Recorder};

use super::{JOB_DURATION_SECONDS, JOBS_IN_FLIGHT, JOBS_TOTAL};
use queuey_core::Disposition;

/// Where the layer's metrics say they come from, as the `metrics` macros
/// would have it.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Every `disposition` label value [`JOBS_TOTAL`] takes, in the order of
/// [`Keys::total`].
const OUTCOMES: [&str; 6] = ["ack", "retry", "defer", "dead_letter", "requeue", "error"];

/// The keys the layer records under for one queue and job type.
#[derive(Debug)]
pub(crate) struct Keys {
    /// The queue's name on the broker (namespace included).
    queue: Arc<str>,
    job_type: &'static str,
    in_flight: Key,
    duration: Key,
    /// [`JOBS_TOTAL`], one key per entry of [`OUTCOMES`].
    total: [Key; OUTCOMES.len()],
}

impl Keys {
    pub(crate) fn new(queue: Arc<str>, job_type: &'static str) -> Self {
        let labels = |extra: Option<&'static str>| {
            let mut labels = vec![
                Label::new("queue", Arc::clone(&queue)),
                Label::from_static_parts("job_type", job_type),
            ];
            if let Some(disposition) = extra {
                labels.push(Label::from_static_parts("disposition", disposition));
            }
            labels
        };
        Keys {
            in_flight: Key::from_parts(JOBS_IN_FLIGHT, labels(None)),
            duration: Key::from_parts(JOB_DURATION_SECONDS, labels(None)),
            total: OUTCOMES.map(|outcome| Key::from_parts(JOBS_TOTAL, labels(Some(outcome)))),
            queue,
            job_type,
        }
    }

    /// Whether these are the keys of `queue` and `job_type`.
    pub(crate) fn are_for(&self, queue: &Arc<str>, job_type: &'static str) -> bool {
        self.job_type == job_type && (Arc::ptr_eq(&self.queue, queue) || self.queue == *queue)
    }

    /// One more job inside the layer.
    pub(crate) fn started(&self) {
        self.in_flight().increment(1.0);
    }

    /// One job fewer inside the layer (answered, or dropped unanswered).
    pub(crate) fn left(&self) {
        self.in_flight().decrement(1.0);
    }

    fn in_flight(&self) -> metrics::Gauge {
        metrics::with_recorder(|recorder| recorder.register_gauge(&self.in_flight, &METADATA))
    }

    /// Records one finished job: its outcome and how long it took.
    pub(crate) fn finished(&self, outcome: Option<&Disposition>, seconds: f64) {
        let outcome = outcome.map_or("error", Disposition::as_str);
        let total = OUTCOMES
            .iter()
            .position(|known| *known == outcome)
            .map(|i| &self.total[i]);
        metrics::with_recorder(|recorder: &dyn Recorder| {
            match total {
                Some(key) => recorder.register_counter(key, &METADATA).increment(1),
                // A disposition this layer does not know yet (the enum is
                // non-exhaustive): its key is built for the occasion.
                None => {
                    let key = Key::from_parts(
                        JOBS_TOTAL,
                        vec![
                            Label::new("queue", Arc::clone(&self.queue)),
                            Label::from_static_parts("job_type", self.job_type),
                            Label::from_static_parts("disposition", outcome),
                        ],
                    );
                    recorder.register_counter(&key, &METADATA).increment(1);
                }
            }
            recorder
                .register_histogram(&self.duration, &METADATA)
                .record(seconds);
        });
    }
}

/// The keys a service last used, kept in its own field and in a slot its
/// clones share (a service cloned per call starts with an empty field).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyCache {
    own: Option<Arc<Keys>>,
    shared: Arc<Mutex<Option<Arc<Keys>>>>,
}

impl KeyCache {
    /// The keys of `queue` and `job_type`, built only when neither this
    /// service nor one of its clones has them.
    pub(crate) fn get(&mut self, queue: &Arc<str>, job_type: &'static str) -> Arc<Keys> {
        if let Some(keys) = &self.own
            && keys.are_for(queue, job_type)
        {
            return Arc::clone(keys);
        }
        let mut shared = crate::lock(&self.shared);
        let keys = match &*shared {
            Some(keys) if keys.are_for(queue, job_type) => Arc::clone(keys),
            _ => {
                let keys = Arc::new(Keys::new(Arc::clone(queue), job_type));
                *shared = Some(Arc::clone(&keys));
                keys
            }
        };
        drop(shared);
        self.own = Some(Arc::clone(&keys));
        keys
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_disposition_has_a_key_of_its_own() {
        let dispositions = [
            Disposition::Ack,
            Disposition::Retry {
                delay: Duration::ZERO,
            },
            Disposition::Defer {
                delay: Duration::ZERO,
            },
            Disposition::DeadLetter { reason: "r".into() },
            Disposition::Requeue,
        ];
        for disposition in &dispositions {
            assert!(
                OUTCOMES.contains(&disposition.as_str()),
                "{}",
                disposition.as_str()
            );
        }
        assert!(OUTCOMES.contains(&"error"));
    }

    #[test]
    fn clones_of_a_service_share_the_keys_one_of_them_built() {
        let fresh = KeyCache::default();
        let queue: Arc<str> = Arc::from("q");
        let first = fresh.clone().get(&queue, "job");
        let second = fresh.clone().get(&queue, "job");
        assert!(Arc::ptr_eq(&first, &second));
        // Another queue replaces them, for the clones too.
        let other = fresh.clone().get(&Arc::from("q2"), "job");
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(Arc::ptr_eq(
            &other,
            &fresh.clone().get(&Arc::from("q2"), "job")
        ));
    }

    #[test]
    fn keys_know_their_queue_by_name_not_only_by_pointer() {
        let keys = Keys::new(Arc::from("q"), "job");
        assert!(keys.are_for(&Arc::from("q"), "job"));
        assert!(!keys.are_for(&Arc::from("q2"), "job"));
        assert!(!keys.are_for(&Arc::from("q"), "other"));
    }
}
