//! One dead letter, read off a dead-letter queue.

use lapin::BasicProperties;
use lapin::types::FieldTable;
use queuey_core::{Envelope, Uuid};
use serde::Serialize;

use crate::dead::fingerprint;
use crate::headers;

/// The reason queuey gives a body that is not an envelope.
pub(crate) const MALFORMED_REASON: &str = "malformed envelope";

/// A dead letter: the exact body and properties, and what queuey's headers
/// and envelope say about it.
#[derive(Debug, Clone)]
pub(crate) struct DeadLetter {
    /// 1-based position in its dead-letter queue when read (1 = oldest).
    pub(crate) position: usize,
    pub(crate) body: Vec<u8>,
    pub(crate) properties: BasicProperties,
    /// The envelope, when the body decodes as one.
    pub(crate) envelope: Option<Envelope>,
    /// The shard whose dead-letter queue it was read from (set by
    /// [`DeadQueues`](crate::dead::DeadQueues)).
    pub(crate) shard: Option<u16>,
}

impl DeadLetter {
    /// A dead letter from a message read at `position`.
    pub(crate) fn new(position: usize, body: Vec<u8>, properties: BasicProperties) -> Self {
        let envelope = Envelope::decode(&body).ok();
        DeadLetter {
            position,
            body,
            properties,
            envelope,
            shard: None,
        }
    }

    fn headers(&self) -> Option<&FieldTable> {
        self.properties.headers().as_ref()
    }

    /// The job id: the envelope's, else a message id that is a UUID.
    pub(crate) fn job_id(&self) -> Option<Uuid> {
        match &self.envelope {
            Some(env) => Some(env.job_id),
            None => self
                .properties
                .message_id()
                .as_ref()
                .and_then(|id| Uuid::try_parse(id.as_str()).ok()),
        }
    }

    /// The id to show and to ask for: the job id, else the message id, else
    /// `#position`.
    pub(crate) fn id(&self) -> String {
        if let Some(id) = self.job_id() {
            return id.to_string();
        }
        match self.properties.message_id() {
            Some(id) if !id.as_str().is_empty() => id.as_str().to_owned(),
            _ => format!("#{}", self.position),
        }
    }

    /// Whether `id` names this dead letter (job id, message id or `#position`).
    pub(crate) fn answers_to(&self, id: &str) -> bool {
        let id = id.trim();
        self.id().eq_ignore_ascii_case(id)
            || id.strip_prefix('#').and_then(|n| n.parse().ok()) == Some(self.position)
            || self
                .properties
                .message_id()
                .as_ref()
                .is_some_and(|m| m.as_str() == id)
    }

    /// The job type, from the envelope or the message's `type` property.
    pub(crate) fn job_type(&self) -> Option<String> {
        match &self.envelope {
            Some(env) => Some(env.job_type.clone()),
            None => self
                .properties
                .kind()
                .as_ref()
                .map(|t| t.as_str().to_owned()),
        }
    }

    /// Why it died (`x-death-reason`), or `(no reason)`.
    pub(crate) fn reason(&self) -> String {
        headers::text(self.headers(), headers::REASON).unwrap_or_else(|| "(no reason)".to_owned())
    }

    /// The first 200 characters of the reason, as a preview sample keeps it.
    pub(crate) fn reason_sample(&self) -> String {
        self.reason().chars().take(200).collect()
    }

    pub(crate) fn fingerprint(&self) -> String {
        fingerprint(&self.reason())
    }

    /// Attempts made (`x-attempts`, else the envelope's attempt).
    pub(crate) fn attempts(&self) -> Option<i64> {
        headers::integer(self.headers(), headers::ATTEMPTS)
            .or_else(|| self.envelope.as_ref().map(|e| i64::from(e.attempt)))
    }

    /// The queue it died on: `x-original-queue`, else the envelope's queue.
    pub(crate) fn original_queue(&self) -> Option<String> {
        headers::text(self.headers(), headers::ORIGINAL_QUEUE)
            .filter(|q| !q.is_empty())
            .or_else(|| self.envelope.as_ref().map(|e| e.queue.clone()))
            .filter(|q| !q.is_empty())
    }

    /// Whether the body is not an envelope.
    pub(crate) fn is_malformed(&self) -> bool {
        self.envelope.is_none()
    }

    /// When it died (`x-died-at`, ms since the Unix epoch), when recorded.
    pub(crate) fn died_at_ms(&self) -> Option<i64> {
        headers::integer(self.headers(), headers::DIED_AT)
    }

    /// Why a malformed body did not decode (`x-parse-error`).
    pub(crate) fn parse_error(&self) -> Option<String> {
        headers::text(self.headers(), headers::PARSE_ERROR)
    }

    /// The error of each attempt, oldest first, the one it died of last.
    pub(crate) fn history(&self) -> History {
        let Some(env) = &self.envelope else {
            return History::default();
        };
        let mut errors: Vec<AttemptRow> = env
            .errors
            .iter()
            .map(|e| AttemptRow {
                attempt: e.attempt,
                at_ms: Some(e.at_ms).filter(|&ms| ms > 0),
                error: e.error.clone(),
                last: false,
            })
            .collect();
        errors.push(AttemptRow {
            attempt: self
                .attempts()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(env.attempt),
            at_ms: self.died_at_ms().and_then(|ms| u64::try_from(ms).ok()),
            error: self.reason(),
            last: true,
        });
        History {
            errors,
            cut: env.errors_cut,
        }
    }

    /// A one-line summary for listings.
    pub(crate) fn summary(&self) -> Summary {
        Summary {
            position: self.position,
            shard: self.shard,
            id: self.id(),
            job_type: self.job_type(),
            reason: self.reason(),
            fingerprint: self.fingerprint(),
            attempts: self.attempts(),
            original_queue: self.original_queue(),
            enqueued_at_ms: self.envelope.as_ref().map(|e| e.enqueued_at_ms),
            died_at_ms: self.died_at_ms(),
            malformed: self.is_malformed(),
            redrives: headers::integer(self.headers(), headers::REDRIVE_COUNT).unwrap_or(0),
            bytes: self.body.len(),
        }
    }
}

/// What `dead ls` shows of one dead letter (the [`DeadLetter`] methods of
/// the same names; `redrives`: `queuey-redrive-count`; `bytes`: body size).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Summary {
    pub(crate) position: usize,
    pub(crate) shard: Option<u16>,
    pub(crate) id: String,
    pub(crate) job_type: Option<String>,
    pub(crate) reason: String,
    pub(crate) fingerprint: String,
    pub(crate) attempts: Option<i64>,
    pub(crate) original_queue: Option<String>,
    pub(crate) enqueued_at_ms: Option<u64>,
    pub(crate) died_at_ms: Option<i64>,
    pub(crate) malformed: bool,
    pub(crate) redrives: i64,
    pub(crate) bytes: usize,
}

/// The error of each attempt, oldest first, and how many older errors the
/// envelope left out (`cut`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct History {
    pub(crate) errors: Vec<AttemptRow>,
    pub(crate) cut: u32,
}

/// The error of one attempt, when it failed (if known), and whether the
/// job died of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AttemptRow {
    pub(crate) attempt: u32,
    pub(crate) at_ms: Option<u64>,
    pub(crate) error: String,
    pub(crate) last: bool,
}

/// Which dead letters an operation applies to. Every set condition must
/// hold. The `queuey dead` commands take it as options, documented here.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub(crate) struct Filter {
    /// Reason contains TEXT (case-insensitive).
    #[arg(long = "filter", value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    /// Job type is exactly TYPE.
    #[arg(long = "type", value_name = "TYPE")]
    pub(crate) job_type: Option<String>,
    /// Reason fingerprint is exactly FP (as `dead stats` prints it).
    #[arg(long, value_name = "FP")]
    pub(crate) fingerprint: Option<String>,
    /// Only this id (repeatable); a #POSITION only with one dead-letter
    /// queue (name the shard of a sharded queue).
    #[arg(long = "id", value_name = "ID")]
    pub(crate) ids: Vec<String>,
}

impl Filter {
    pub(crate) fn all() -> Self {
        Filter::default()
    }

    pub(crate) fn matches(&self, letter: &DeadLetter) -> bool {
        let reason_ok = self.reason.as_ref().is_none_or(|text| {
            letter
                .reason()
                .to_lowercase()
                .contains(&text.to_lowercase())
        });
        let type_ok = self
            .job_type
            .as_ref()
            .is_none_or(|t| letter.job_type().as_deref() == Some(t.as_str()));
        let fingerprint_ok = self
            .fingerprint
            .as_ref()
            .is_none_or(|f| &letter.fingerprint() == f);
        if !(reason_ok && type_ok && fingerprint_ok) {
            return false;
        }
        self.ids.is_empty() || self.ids.iter().any(|id| letter.answers_to(id))
    }

    /// Whether no condition is set.
    pub(crate) fn is_all(&self) -> bool {
        *self == Filter::default()
    }
}
