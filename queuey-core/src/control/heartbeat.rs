//! What each running worker says of itself every few seconds.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Progress;

/// How often a worker sends its [`Heartbeat`] unless told otherwise.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// How many intervals without a heartbeat make a worker count as gone.
pub const MISSED_HEARTBEATS: u32 = 3;

/// The most running jobs one heartbeat lists (those that started first).
pub const MAX_RUNNING_LISTED: usize = 500;

/// The most limit keys one heartbeat lists (the busiest).
pub const MAX_LIMITS_LISTED: usize = 50;

/// The largest heartbeat a reader decodes, in bytes (well above one listing
/// [`MAX_RUNNING_LISTED`] jobs); a larger one is skipped unread.
pub const MAX_HEARTBEAT_BYTES: usize = 256 * 1024;

/// The most workers one listing holds; further ones are skipped (and
/// counted), so made-up workers cannot grow a reader without bound.
pub const MAX_WORKERS_LISTED: usize = 10_000;

/// One worker's account of itself: who it is, what it consumes, what it
/// runs right now, and what it has done since it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The worker's id, new for every worker started.
    pub worker_id: Uuid,
    /// The host it runs on.
    pub host: String,
    /// The name its application gave its broker connection
    /// (`RabbitMqOptions::connection_name`), shown in listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its process id.
    pub pid: u32,
    /// The version of queuey it runs.
    pub version: String,
    /// The queues it consumes, by their names on the broker.
    pub queues: Vec<String>,
    /// The queues it stays off because they are paused.
    #[serde(default)]
    pub paused: Vec<String>,
    /// How many jobs it runs at once, at most.
    pub concurrency: usize,
    /// How its connection to the broker stands (`connected`,
    /// `reconnecting`, ...).
    pub connection: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// When this heartbeat was sent, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// How often it sends one, in milliseconds.
    pub interval_ms: u64,
    /// Whether it is shutting down (its last heartbeat says so).
    #[serde(default)]
    pub stopping: bool,
    /// The jobs it runs right now: at most [`MAX_RUNNING_LISTED`], those
    /// that started first.
    #[serde(default)]
    pub running: Vec<RunningJob>,
    /// What it has done since it started, per queue.
    #[serde(default)]
    pub totals: Vec<QueueTotals>,
    /// The per-key limits its process applies, for the keys it ran or held
    /// back lately: at most [`MAX_LIMITS_LISTED`], the busiest. Workers of
    /// one process report the same list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitSeen>,
}

/// A job a worker runs right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningJob {
    /// The job's id.
    pub job_id: Uuid,
    /// Its type.
    pub job_type: String,
    /// Its queue, by its name on the broker.
    pub queue: String,
    /// Its attempt (1-based).
    pub attempt: u32,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// How far it got, as its handler last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The tenant it belongs to, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// One key of a per-key limit as a worker's process sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSeen {
    /// The limit's name (a job type's name, for a declared limit).
    pub name: String,
    /// The key.
    pub key: String,
    /// How many jobs of the key may run at once, if the limit says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// How many may start per period (`10/s`), if the limit says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// The key's running slots this process holds now.
    pub running: u32,
    /// Jobs of the key the store counted as waiting for a slot, across
    /// the fleet, when this process last found every slot held.
    pub waiting: u32,
    /// Jobs of the key this process told to wait (for a turn, a slot or
    /// the store) since it started seeing the key.
    pub waits: u64,
}

/// What a worker has done with one queue's jobs since it started: each
/// count only grows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueTotals {
    /// The queue, by its name on the broker.
    pub queue: String,
    /// Jobs acknowledged.
    pub finished: u64,
    /// Jobs sent to a hold for another attempt.
    pub retried: u64,
    /// Jobs deferred.
    pub deferred: u64,
    /// Jobs dead-lettered.
    pub dead_lettered: u64,
}

impl Heartbeat {
    /// The heartbeat as JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a heartbeat; `None` for bytes that are not one, or that are
    /// more than [`MAX_HEARTBEAT_BYTES`] (skipped unread).
    pub fn decode(bytes: &[u8]) -> Option<Heartbeat> {
        if bytes.len() > MAX_HEARTBEAT_BYTES {
            return None;
        }
        serde_json::from_slice(bytes).ok()
    }

    /// How long after this heartbeat, without another, its worker counts as
    /// gone: [`MISSED_HEARTBEATS`] intervals.
    pub fn lifetime(&self) -> Duration {
        Duration::from_millis(
            self.interval_ms
                .saturating_mul(u64::from(MISSED_HEARTBEATS)),
        )
    }

    /// The running jobs that started more than `threshold` before this
    /// heartbeat was sent.
    pub fn running_longer_than(&self, threshold: Duration) -> impl Iterator<Item = &RunningJob> {
        let threshold = u64::try_from(threshold.as_millis()).unwrap_or(u64::MAX);
        self.running
            .iter()
            .filter(move |job| self.at_ms.saturating_sub(job.started_at_ms) > threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_round_trip_and_tell_long_jobs() {
        let beat = Heartbeat {
            worker_id: Uuid::new_v4(),
            host: "web-1".into(),
            name: Some("emails-worker".into()),
            pid: 42,
            version: "0.1.0".into(),
            queues: vec!["app.emails".into()],
            paused: vec![],
            concurrency: 8,
            connection: "connected".into(),
            started_at_ms: 1_000,
            at_ms: 100_000,
            interval_ms: 5_000,
            stopping: false,
            running: vec![
                RunningJob {
                    job_id: Uuid::new_v4(),
                    job_type: "send".into(),
                    queue: "app.emails".into(),
                    attempt: 1,
                    started_at_ms: 99_000,
                    progress: None,
                    tenant: None,
                },
                RunningJob {
                    job_id: Uuid::new_v4(),
                    job_type: "export".into(),
                    queue: "app.emails".into(),
                    attempt: 2,
                    started_at_ms: 10_000,
                    progress: Some(Progress::new(40, "4 of 10 pages")),
                    tenant: Some("acme".into()),
                },
            ],
            limits: vec![LimitSeen {
                name: "call_api".into(),
                key: "api.example.com".into(),
                concurrency: Some(3),
                rate: Some("10/s".into()),
                running: 2,
                waiting: 5,
                waits: 17,
            }],
            totals: vec![QueueTotals {
                queue: "app.emails".into(),
                finished: 10,
                ..QueueTotals::default()
            }],
        };
        assert_eq!(Heartbeat::decode(&beat.encode()), Some(beat.clone()));
        let long: Vec<_> = beat
            .running_longer_than(Duration::from_secs(60))
            .map(|j| j.job_type.as_str())
            .collect();
        assert_eq!(long, ["export"]);
        assert_eq!(beat.lifetime(), Duration::from_secs(15));
    }

    #[test]
    fn a_heartbeat_over_the_size_limit_is_not_decoded() {
        let mut beat = Heartbeat {
            worker_id: Uuid::new_v4(),
            host: "h".into(),
            name: None,
            pid: 1,
            version: "0".into(),
            queues: vec![],
            paused: vec![],
            concurrency: 1,
            connection: "connected".into(),
            started_at_ms: 0,
            at_ms: 0,
            interval_ms: 5_000,
            stopping: false,
            running: vec![],
            totals: vec![],
            limits: vec![],
        };
        beat.host = "x".repeat(MAX_HEARTBEAT_BYTES);
        assert_eq!(Heartbeat::decode(&beat.encode()), None);
        beat.host = "h".into();
        assert_eq!(Heartbeat::decode(&beat.encode()), Some(beat));
    }
}
