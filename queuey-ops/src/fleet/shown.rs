//! What the tool prints of the workers' heartbeats, on a terminal.
//!
//! Any client of the broker can write a heartbeat, so its host, job types,
//! queue names and versions are shown through the tool's one terminal
//! escaper, [`escape::line`]: a control sequence in them is printed as an
//! escape instead of being run by the terminal.

use queuey_core::control::{Heartbeat, RunningJob};

use super::{label, running_for};
use crate::escape;
use crate::time::format_duration_ms;

/// A worker's [`label`], escaped for a terminal.
pub(crate) fn shown_label(beat: &Heartbeat) -> String {
    escape::line(&label(beat)).into_owned()
}

/// The escaped labels of the workers of `workers` that consume `queue`.
pub(crate) fn consumers_of(workers: &[Heartbeat], queue: &str) -> Vec<String> {
    workers
        .iter()
        .filter(|w| w.queues.iter().any(|q| q == queue))
        .map(shown_label)
        .collect()
}

/// One running job as a preview line: its id, type and attempt, the worker
/// running it and for how long, and its progress, every heartbeat string
/// escaped.
pub(crate) fn running_line(worker: &Heartbeat, job: &RunningJob) -> String {
    let progress = job
        .progress
        .as_ref()
        .map(|progress| format!(", at {}", escape::line(&progress.to_string())))
        .unwrap_or_default();
    format!(
        "  running now: {} ({}, attempt {}) on {} for {}{progress}",
        job.job_id,
        escape::line(&job.job_type),
        job.attempt,
        shown_label(worker),
        format_duration_ms(running_for(worker, job).as_millis())
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use queuey_core::Uuid;

    use super::*;

    /// A heartbeat whose host and job type try to set the terminal's title,
    /// ring its bell and overwrite the line.
    pub(crate) fn forged() -> Heartbeat {
        let job = RunningJob {
            job_id: Uuid::nil(),
            job_type: "send\u{1b}[2K\rall good\u{7}".into(),
            queue: "app.emails".into(),
            attempt: 1,
            started_at_ms: 1_000,
            progress: Some(queuey_core::control::Progress {
                percent: 40,
                message: "half\u{1b}[2J".into(),
            }),
            tenant: Some("acme\u{1b}[2J".into()),
        };
        Heartbeat {
            worker_id: Uuid::nil(),
            host: "web-1\u{1b}]0;owned\u{7}\r\u{9b}31m".into(),
            name: None,
            pid: 7,
            version: "0".into(),
            queues: vec!["app.emails".into()],
            paused: vec![],
            concurrency: 1,
            connection: "connected".into(),
            started_at_ms: 0,
            at_ms: 61_000,
            interval_ms: 5_000,
            stopping: false,
            running: vec![job],
            totals: vec![],
            limits: vec![],
        }
    }

    fn assert_inert(text: &str) {
        assert!(!text.chars().any(escape::is_unsafe), "{text:?}");
    }

    #[test]
    fn a_running_job_line_shows_the_forged_host_and_type_escaped() {
        let beat = forged();
        let line = running_line(&beat, &beat.running[0]);
        assert_inert(&line);
        assert!(
            line.contains(r"(send\e[2K\rall good\x07, attempt 1)"),
            "{line}"
        );
        assert!(
            line.contains(r"on web-1\e]0;owned\x07\r\u{9b}31m:7"),
            "{line}"
        );
        assert!(line.ends_with(r", at 40% half\e[2J"), "{line}");
    }

    #[test]
    fn the_consumers_of_a_queue_are_listed_escaped() {
        let beat = forged();
        let consumers = consumers_of(std::slice::from_ref(&beat), "app.emails");
        assert_eq!(consumers, [r"web-1\e]0;owned\x07\r\u{9b}31m:7"]);
        assert!(consumers_of(&[beat], "app.other").is_empty());
    }
}
