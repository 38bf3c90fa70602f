//! The errors of a job's earlier attempts, carried in its envelope.
//!
//! Each retried attempt adds an [`AttemptError`] to the envelope it is
//! republished with ([`Envelope::record_error`]), so later attempts and the
//! dead letter carry every attempt's story. Only the last
//! [`MAX_RECORDED_ERRORS`] are kept, each cut to [`MAX_ERROR_BYTES`];
//! [`Envelope::errors_cut`] counts the older ones left out.

use serde::{Deserialize, Serialize};

use super::Envelope;

/// How many errors an envelope keeps: the most recent ones.
pub const MAX_RECORDED_ERRORS: usize = 10;

/// The longest error text an envelope keeps, in bytes; a longer one is cut
/// on a character boundary and ends with `…`.
pub const MAX_ERROR_BYTES: usize = 1024;

/// The error of one failed attempt.
///
/// ```
/// use queuey_core::{AttemptError, Envelope};
///
/// let payload = serde_json::value::to_raw_value(&1)?;
/// let mut env = Envelope::new("t", "q", payload);
/// env.record_error("connection reset", 1_767_225_600_000);
/// assert_eq!(env.errors, vec![AttemptError::new(1, 1_767_225_600_000, "connection reset")]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttemptError {
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// When it failed, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub at_ms: u64,
    /// The error and its sources, joined by `: ` (at most
    /// [`MAX_ERROR_BYTES`]).
    pub error: String,
}

impl AttemptError {
    /// The error of `attempt` at `at_ms`, its text cut to
    /// [`MAX_ERROR_BYTES`].
    pub fn new(attempt: u32, at_ms: u64, error: &str) -> Self {
        AttemptError {
            attempt,
            at_ms,
            error: cap_error(error),
        }
    }
}

/// `error`, cut on a character boundary to at most [`MAX_ERROR_BYTES`]
/// (with `…` at the end when cut).
fn cap_error(error: &str) -> String {
    if error.len() <= MAX_ERROR_BYTES {
        return error.to_owned();
    }
    const ELLIPSIS: &str = "…";
    let mut end = MAX_ERROR_BYTES - ELLIPSIS.len();
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    let mut text = String::with_capacity(end + ELLIPSIS.len());
    text.push_str(&error[..end]);
    text.push_str(ELLIPSIS);
    text
}

impl Envelope {
    /// Records that this attempt failed with `error` at `at_ms` (ms since the
    /// Unix epoch); past [`MAX_RECORDED_ERRORS`] the oldest is dropped and
    /// counted in [`errors_cut`](Envelope::errors_cut).
    ///
    /// A worker calls it on a delivery it retries, before the next attempt
    /// is built from the envelope.
    ///
    /// ```
    /// use queuey_core::Envelope;
    /// use queuey_core::MAX_RECORDED_ERRORS;
    ///
    /// let payload = serde_json::value::to_raw_value(&1)?;
    /// let mut env = Envelope::new("t", "q", payload);
    /// for attempt in 1..=12 {
    ///     env.attempt = attempt;
    ///     env.record_error(&format!("failure {attempt}"), 0);
    /// }
    /// assert_eq!(env.errors.len(), MAX_RECORDED_ERRORS);
    /// assert_eq!(env.errors_cut, 2);
    /// assert_eq!(env.errors[0].error, "failure 3");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_error(&mut self, error: &str, at_ms: u64) {
        if self.errors.len() >= MAX_RECORDED_ERRORS {
            let drop = self.errors.len() + 1 - MAX_RECORDED_ERRORS;
            self.errors.drain(..drop);
            self.errors_cut = self
                .errors_cut
                .saturating_add(u32::try_from(drop).unwrap_or(u32::MAX));
        }
        self.errors
            .push(AttemptError::new(self.attempt, at_ms, error));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> Envelope {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        Envelope::new("t", "q", payload)
    }

    #[test]
    fn an_error_is_recorded_with_its_attempt_and_time() {
        let mut env = envelope();
        env.attempt = 3;
        env.record_error("boom", 42);
        assert_eq!(env.errors, vec![AttemptError::new(3, 42, "boom")]);
        assert_eq!(env.errors_cut, 0);
    }

    #[test]
    fn the_history_keeps_the_last_errors_and_counts_the_rest() {
        let mut env = envelope();
        for attempt in 1..=25 {
            env.attempt = attempt;
            env.record_error(&attempt.to_string(), u64::from(attempt));
        }
        assert_eq!(env.errors.len(), MAX_RECORDED_ERRORS);
        assert_eq!(env.errors_cut, 15);
        let attempts: Vec<u32> = env.errors.iter().map(|e| e.attempt).collect();
        assert_eq!(attempts, (16..=25).collect::<Vec<_>>());
    }

    #[test]
    fn a_long_error_is_cut_on_a_character_boundary() {
        let mut env = envelope();
        env.record_error(&"é".repeat(MAX_ERROR_BYTES), 0);
        let kept = &env.errors[0].error;
        assert!(kept.len() <= MAX_ERROR_BYTES, "{}", kept.len());
        assert!(kept.ends_with('…'));
        assert!(kept.trim_end_matches('…').chars().all(|c| c == 'é'));
        let exact = "a".repeat(MAX_ERROR_BYTES);
        assert_eq!(AttemptError::new(1, 0, &exact).error, exact);
    }

    #[test]
    fn the_history_survives_encoding_retries_and_deferrals() {
        let mut env = envelope();
        env.record_error("first", 1);
        let next = env.next_attempt();
        let mut next = Envelope::decode(&next.encode().unwrap()).unwrap();
        next.record_error("second", 2);
        let held = next.deferred(5);
        let back = Envelope::decode(&held.encode().unwrap()).unwrap();
        assert_eq!(back, held);
        let seen: Vec<(u32, &str)> = back
            .errors
            .iter()
            .map(|e| (e.attempt, e.error.as_str()))
            .collect();
        assert_eq!(seen, [(1, "first"), (2, "second")]);
    }

    #[test]
    fn without_a_history_nothing_is_written() {
        let body = String::from_utf8(envelope().encode().unwrap()).unwrap();
        assert!(!body.contains("errors"), "{body}");
    }
}
