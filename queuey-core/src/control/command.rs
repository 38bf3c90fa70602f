//! The commands an operator sends a running fleet, and their wire form.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::Envelope;
use crate::clock::now_ms;

/// What an operator asks of every worker of a fleet.
///
/// Commands are facts about the fleet, not requests to one worker: a worker
/// started after a command was sent learns it too (see
/// [`ControlChannel::send_control`](crate::backend::ControlChannel::send_control)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Command {
    /// Cancel one job, wherever it is: the next worker to take it
    /// dead-letters it as [`CANCELLED_REASON`](super::CANCELLED_REASON); one
    /// running it tells its handler through its [`CancelSignal`](super::CancelSignal).
    Cancel {
        /// The job's id.
        job_id: Uuid,
    },
    /// Cancel every matching job enqueued before the command was sent.
    CancelMatching {
        /// Which jobs.
        filter: CancelFilter,
    },
    /// Stop taking deliveries of a queue on every worker: running jobs
    /// finish, those taken but not started go back to the broker to wait.
    Pause {
        /// The queue's name on the broker (its namespace included).
        queue: String,
    },
    /// Take deliveries of a paused queue again.
    Resume {
        /// The queue's name on the broker (its namespace included).
        queue: String,
    },
    /// Withdraw the cancellation ([`Cancel`](Command::Cancel) or
    /// [`CancelMatching`](Command::CancelMatching)) sent in the record with
    /// this id: its jobs run when next taken; those already dead-lettered
    /// stay there until redriven.
    Revoke {
        /// The id of the record whose cancellation is withdrawn.
        record: Uuid,
    },
}

impl Command {
    /// A short lowercase name (`cancel`, `cancel_matching`, `pause`,
    /// `resume`, `revoke`), for logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Command::Cancel { .. } => "cancel",
            Command::CancelMatching { .. } => "cancel_matching",
            Command::Pause { .. } => "pause",
            Command::Resume { .. } => "resume",
            Command::Revoke { .. } => "revoke",
        }
    }
}

/// Which jobs a [`Command::CancelMatching`] cancels: every condition given
/// must hold, and at least one must be given.
///
/// ```
/// use queuey_core::control::CancelFilter;
///
/// let filter = CancelFilter::new()
///     .queue("app.emails")
///     .job_type("send_newsletter")
///     .payload_equals("campaign", 42);
/// assert!(filter.validate().is_ok());
/// assert!(CancelFilter::new().validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CancelFilter {
    /// The job's queue is exactly this (its name on the broker), or one of
    /// its shards when it is sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The job's type is exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    /// Each of these payload fields has the given value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload: Vec<PayloadMatch>,
    /// Only jobs enqueued at or before this time (milliseconds since the Unix
    /// epoch, by the enqueuing host's clock). [`Command::CancelMatching`]
    /// built through [`CancelFilter::into_command`] sets it to now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enqueued_before_ms: Option<u64>,
}

/// One payload condition of a [`CancelFilter`]: the field at `path` (object
/// keys, outermost first; a number picks an array element) equals `value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadMatch {
    /// The field's path in the payload.
    pub path: Vec<String>,
    /// The value it must have.
    pub value: Value,
}

impl PayloadMatch {
    /// Parses `path=value`: the path in dots (`user.id`), the value as JSON
    /// when it is JSON (`42`, `true`, `"x"`, `null`), else as a string.
    ///
    /// ```
    /// use queuey_core::control::PayloadMatch;
    /// use serde_json::json;
    ///
    /// let m = PayloadMatch::parse("user.id=42")?;
    /// assert_eq!(m.path, ["user", "id"]);
    /// assert_eq!(m.value, json!(42));
    /// assert_eq!(PayloadMatch::parse("kind=newsletter")?.value, json!("newsletter"));
    /// assert!(PayloadMatch::parse("no-equals-sign").is_err());
    /// # Ok::<(), queuey_core::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<PayloadMatch, crate::Error> {
        let Some((path, value)) = text.split_once('=') else {
            return Err(crate::Error::invalid_config(format!(
                "payload condition `{text}` has no `=`: write it as PATH=VALUE, \
                 for example `user.id=42`"
            )));
        };
        let path: Vec<String> = path.trim().split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(crate::Error::invalid_config(format!(
                "payload condition `{text}` has an empty field name in its path"
            )));
        }
        let value = value.trim();
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::from(value));
        Ok(PayloadMatch { path, value })
    }

    fn holds(&self, payload: &Value) -> bool {
        let found = self.path.iter().try_fold(payload, |at, key| match at {
            Value::Object(map) => map.get(key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        });
        found == Some(&self.value)
    }
}

impl CancelFilter {
    /// A filter with no condition yet.
    pub fn new() -> Self {
        CancelFilter::default()
    }

    /// Only jobs of this queue (its name on the broker). A sharded
    /// queue's name covers its shards too.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Only jobs of this type.
    pub fn job_type(mut self, job_type: impl Into<String>) -> Self {
        self.job_type = Some(job_type.into());
        self
    }

    /// Only jobs whose payload field at `path` (dotted: `user.id`) equals
    /// `value`.
    pub fn payload_equals(mut self, path: &str, value: impl Into<Value>) -> Self {
        self.payload.push(PayloadMatch {
            path: path.split('.').map(str::to_owned).collect(),
            value: value.into(),
        });
        self
    }

    /// Only jobs enqueued at or before `ms` (ms since the Unix epoch; unset,
    /// [`into_command`](Self::into_command) sets now). A bound later than the
    /// command's own time is refused.
    pub fn enqueued_before(mut self, ms: u64) -> Self {
        self.enqueued_before_ms = Some(ms);
        self
    }

    /// Whether the filter has a condition besides its time bound.
    pub fn has_condition(&self) -> bool {
        self.queue.is_some() || self.job_type.is_some() || !self.payload.is_empty()
    }

    /// Refuses a filter with no condition, which would cancel everything,
    /// or with more payload conditions than a reader accepts.
    pub fn validate(&self) -> Result<(), crate::Error> {
        Ok(self.check_conditions()?)
    }

    /// At least one condition, and at most
    /// [`MAX_PAYLOAD_CONDITIONS`](super::MAX_PAYLOAD_CONDITIONS) on the payload.
    pub(super) fn check_conditions(&self) -> Result<(), super::RecordRefusal> {
        if !self.has_condition() {
            return Err(super::RecordRefusal::NoCondition);
        }
        if self.payload.len() > super::MAX_PAYLOAD_CONDITIONS {
            return Err(super::RecordRefusal::TooManyConditions);
        }
        Ok(())
    }

    /// The command that cancels the matching jobs enqueued until now.
    pub fn into_command(mut self) -> Result<Command, crate::Error> {
        self.validate()?;
        self.enqueued_before_ms.get_or_insert_with(now_ms);
        Ok(Command::CancelMatching { filter: self })
    }

    /// Whether a job of `job_type` on `queue` may match by queue and type
    /// alone (all a tool knows of a job from a heartbeat).
    pub fn may_match(&self, queue: &str, job_type: &str) -> bool {
        let of_queue = |q: &str| {
            q == queue || crate::shard::parse_shard_name(queue).is_some_and(|(base, _)| base == q)
        };
        self.queue.as_deref().is_none_or(of_queue)
            && self.job_type.as_deref().is_none_or(|t| t == job_type)
    }

    /// Whether `envelope`'s job matches; the payload is parsed only when a
    /// payload condition needs it.
    pub fn matches(&self, envelope: &Envelope) -> bool {
        self.matches_with(envelope, &mut Payload::new(envelope))
    }

    /// [`matches`](Self::matches), with the payload parsed at most once
    /// however many filters ask.
    pub(crate) fn matches_with(&self, envelope: &Envelope, payload: &mut Payload<'_>) -> bool {
        let time_ok = self
            .enqueued_before_ms
            .is_none_or(|before| envelope.enqueued_at_ms <= before);
        if !(time_ok && self.may_match(&envelope.queue, &envelope.job_type)) {
            return false;
        }
        if self.payload.is_empty() {
            return true;
        }
        match payload.parsed() {
            Some(parsed) => self.payload.iter().all(|m| m.holds(parsed)),
            None => false,
        }
    }
}

/// A job's payload, parsed on the first look and kept for the next.
pub(crate) struct Payload<'a> {
    envelope: &'a Envelope,
    parsed: Option<Option<Value>>,
}

impl<'a> Payload<'a> {
    pub(crate) fn new(envelope: &'a Envelope) -> Self {
        Payload {
            envelope,
            parsed: None,
        }
    }

    /// The payload as JSON; `None` when it is not JSON.
    fn parsed(&mut self) -> Option<&Value> {
        let envelope = self.envelope;
        self.parsed
            .get_or_insert_with(|| serde_json::from_str(envelope.payload.get()).ok())
            .as_ref()
    }
}

/// A [`Command`] as it travels: with an id of its own, the time it was
/// sent and who sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRecord {
    /// This record's id.
    pub id: Uuid,
    /// When it was sent, in milliseconds since the Unix epoch (the sender's
    /// clock).
    pub at_ms: u64,
    /// Who sent it, as the sender described itself (`queuey` and the user,
    /// a host name), for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The command.
    #[serde(flatten)]
    pub command: Command,
}

impl ControlRecord {
    /// A record of `command`, sent now.
    pub fn new(command: Command) -> Self {
        ControlRecord {
            id: Uuid::new_v4(),
            at_ms: now_ms(),
            by: None,
            command,
        }
    }

    /// Says who sent it.
    pub fn by(mut self, by: impl Into<String>) -> Self {
        self.by = Some(by.into());
        self
    }

    /// The record as JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        // A record holds strings, numbers and JSON values only.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a record; `None` for bytes that are not one (a newer command
    /// this version does not know, say), which a follower skips.
    pub fn decode(bytes: &[u8]) -> Option<ControlRecord> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(job_type: &str, payload: Value) -> Envelope {
        Envelope::new(
            job_type,
            "app.emails",
            serde_json::value::to_raw_value(&payload).unwrap(),
        )
    }

    #[test]
    fn records_round_trip() {
        let commands = [
            Command::Cancel {
                job_id: Uuid::new_v4(),
            },
            Command::Pause { queue: "q".into() },
            Command::Resume { queue: "q".into() },
            CancelFilter::new()
                .job_type("t")
                .payload_equals("a.b", 1)
                .into_command()
                .unwrap(),
        ];
        for command in commands {
            let record = ControlRecord::new(command).by("ops@host");
            assert_eq!(ControlRecord::decode(&record.encode()), Some(record));
        }
        assert_eq!(ControlRecord::decode(b"{\"command\":\"reboot\"}"), None);
    }

    #[test]
    fn filters_match_type_queue_payload_and_time() {
        let job = envelope("send", json!({"campaign": 42, "to": ["a", "b"]}));
        assert!(CancelFilter::new().job_type("send").matches(&job));
        assert!(!CancelFilter::new().job_type("other").matches(&job));
        assert!(!CancelFilter::new().queue("app.other").matches(&job));
        // A queue's name covers its shards; a shard's name only that shard.
        let mut on_shard = job.clone();
        on_shard.queue = "app.emails.s3".into();
        assert!(CancelFilter::new().queue("app.emails").matches(&on_shard));
        assert!(
            CancelFilter::new()
                .queue("app.emails.s3")
                .matches(&on_shard)
        );
        assert!(
            !CancelFilter::new()
                .queue("app.emails.s2")
                .matches(&on_shard)
        );
        assert!(!CancelFilter::new().queue("app").matches(&on_shard));
        assert!(
            CancelFilter::new()
                .payload_equals("campaign", 42)
                .matches(&job)
        );
        assert!(
            !CancelFilter::new()
                .payload_equals("campaign", 7)
                .matches(&job)
        );
        assert!(
            CancelFilter::new()
                .payload_equals("to.1", "b")
                .matches(&job)
        );
        assert!(
            !CancelFilter::new()
                .payload_equals("to.9", "b")
                .matches(&job)
        );
        let Command::CancelMatching { filter } =
            CancelFilter::new().job_type("send").into_command().unwrap()
        else {
            unreachable!()
        };
        assert!(filter.matches(&job));
        let mut later = job.clone();
        later.enqueued_at_ms = filter.enqueued_before_ms.unwrap() + 1;
        assert!(!filter.matches(&later));
    }

    #[test]
    fn a_filter_without_conditions_is_refused() {
        assert!(CancelFilter::new().into_command().is_err());
        assert!(PayloadMatch::parse("a..b=1").is_err());
    }
}
