//! What makes a control record acceptable, whoever sent it.
//!
//! A record is checked by the sender before publishing (a mistake is an
//! error at the call) and by every reader before applying (a record that
//! came some other way changes nothing). The rules:
//!
//! 1. its encoded form is at most [`MAX_RECORD_BYTES`];
//! 2. `at_ms` is at most [`CLOCK_SKEW`] past the reader's clock (a record
//!    from the future would outlive every retention rule);
//! 3. a queue it names is a name RabbitMQ could have (1 to 255 bytes);
//! 4. a [`CancelMatching`](Command::CancelMatching) filter has a condition
//!    (queue, job type or payload field), at most
//!    [`MAX_PAYLOAD_CONDITIONS`](super::MAX_PAYLOAD_CONDITIONS) payload
//!    conditions, and an `enqueued_before_ms` no later than the record
//!    (plus the skew): it reaches only jobs that existed when sent.

use super::command::{CancelFilter, Command, ControlRecord};
use super::refusal::{CLOCK_SKEW, MAX_RECORD_BYTES, RecordRefusal};

impl ControlRecord {
    /// Checks the record against every rule above at `now_ms`, the size rule
    /// on the record encoded. A reader that checked the decoded bytes'
    /// size ([`check_size`]) asks [`check_content`](Self::check_content),
    /// which encodes nothing.
    ///
    /// ```
    /// use queuey_core::control::{CancelFilter, Command, ControlRecord, RecordRefusal};
    ///
    /// let record = ControlRecord::new(CancelFilter::new().job_type("send").into_command()?);
    /// assert_eq!(record.check(record.at_ms), Ok(()));
    ///
    /// let everything = ControlRecord::new(Command::CancelMatching { filter: CancelFilter::new() });
    /// assert_eq!(everything.check(everything.at_ms), Err(RecordRefusal::NoCondition));
    /// # Ok::<(), queuey_core::Error>(())
    /// ```
    pub fn check(&self, now_ms: u64) -> Result<(), RecordRefusal> {
        self.check_content(now_ms)?;
        check_size(self.encode().len())
    }

    /// Every rule above but the size: for a record whose bytes were
    /// checked with [`check_size`] before they were decoded.
    pub fn check_content(&self, now_ms: u64) -> Result<(), RecordRefusal> {
        if is_ahead(self.at_ms, now_ms) {
            return Err(RecordRefusal::FromTheFuture {
                at_ms: self.at_ms,
                now_ms,
            });
        }
        match &self.command {
            Command::Cancel { .. } | Command::Revoke { .. } => Ok(()),
            Command::Pause { queue } | Command::Resume { queue } => check_queue(queue),
            Command::CancelMatching { filter } => check_filter(filter, self.at_ms),
        }
    }
}

/// Whether a time stamped `at_ms` by another host lies ahead of a clock
/// reading `now_ms` by more than [`CLOCK_SKEW`]: what no honest sender
/// stamps (a command, a schedule's last tick).
pub fn is_ahead(at_ms: u64, now_ms: u64) -> bool {
    let skew_ms = u64::try_from(CLOCK_SKEW.as_millis()).unwrap_or(u64::MAX);
    at_ms > now_ms.saturating_add(skew_ms)
}

/// Checks the size of an encoded record, before anything decodes it.
pub fn check_size(bytes: usize) -> Result<(), RecordRefusal> {
    if bytes > MAX_RECORD_BYTES {
        return Err(RecordRefusal::TooLarge { bytes });
    }
    Ok(())
}

fn check_queue(queue: &str) -> Result<(), RecordRefusal> {
    if queue.is_empty() || queue.len() > crate::MAX_QUEUE_NAME_BYTES {
        return Err(RecordRefusal::BadQueueName);
    }
    Ok(())
}

fn check_filter(filter: &CancelFilter, at_ms: u64) -> Result<(), RecordRefusal> {
    filter.check_conditions()?;
    if let Some(queue) = &filter.queue {
        check_queue(queue)?;
    }
    match filter.enqueued_before_ms {
        Some(before) if !is_ahead(before, at_ms) => Ok(()),
        _ => Err(RecordRefusal::Unbounded),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::MAX_PAYLOAD_CONDITIONS;
    use uuid::Uuid;

    const NOW: u64 = 1_800_000_000_000;

    fn at(command: Command, at_ms: u64) -> ControlRecord {
        let mut record = ControlRecord::new(command);
        record.at_ms = at_ms;
        record
    }

    fn matching(filter: CancelFilter) -> Command {
        Command::CancelMatching { filter }
    }

    #[test]
    fn honest_records_pass() {
        let filter = CancelFilter::new().queue("app.emails").job_type("send");
        let bounded = filter.clone().enqueued_before(NOW);
        for command in [
            Command::Cancel {
                job_id: Uuid::new_v4(),
            },
            Command::Pause { queue: "q".into() },
            Command::Resume { queue: "q".into() },
            Command::Revoke {
                record: Uuid::new_v4(),
            },
            matching(bounded),
        ] {
            assert_eq!(at(command, NOW).check(NOW), Ok(()));
        }
        // A sender's clock a little ahead is fine.
        assert_eq!(
            at(Command::Pause { queue: "q".into() }, NOW + 60_000).check(NOW),
            Ok(())
        );
    }

    #[test]
    fn a_filter_that_would_cancel_everything_or_the_future_is_refused() {
        assert_eq!(
            at(matching(CancelFilter::new().enqueued_before(NOW)), NOW).check(NOW),
            Err(RecordRefusal::NoCondition)
        );
        assert_eq!(
            at(matching(CancelFilter::new().job_type("t")), NOW).check(NOW),
            Err(RecordRefusal::Unbounded)
        );
        assert_eq!(
            at(
                matching(CancelFilter::new().job_type("t").enqueued_before(u64::MAX)),
                NOW
            )
            .check(NOW),
            Err(RecordRefusal::Unbounded)
        );
        let mut many = CancelFilter::new().enqueued_before(NOW);
        for i in 0..=MAX_PAYLOAD_CONDITIONS {
            many = many.payload_equals(&format!("f{i}"), i);
        }
        assert_eq!(
            at(matching(many), NOW).check(NOW),
            Err(RecordRefusal::TooManyConditions)
        );
    }

    #[test]
    fn records_from_the_future_and_odd_names_are_refused() {
        let far = at(Command::Pause { queue: "q".into() }, u64::MAX);
        assert!(matches!(
            far.check(NOW),
            Err(RecordRefusal::FromTheFuture { .. })
        ));
        assert_eq!(
            at(
                Command::Pause {
                    queue: String::new()
                },
                NOW
            )
            .check(NOW),
            Err(RecordRefusal::BadQueueName)
        );
        assert_eq!(
            at(
                Command::Resume {
                    queue: "q".repeat(256)
                },
                NOW
            )
            .check(NOW),
            Err(RecordRefusal::BadQueueName)
        );
        let big = matching(
            CancelFilter::new()
                .payload_equals("blob", "x".repeat(MAX_RECORD_BYTES))
                .enqueued_before(NOW),
        );
        assert!(matches!(
            at(big, NOW).check(NOW),
            Err(RecordRefusal::TooLarge { .. })
        ));
        assert_eq!(check_size(MAX_RECORD_BYTES), Ok(()));
    }
}
