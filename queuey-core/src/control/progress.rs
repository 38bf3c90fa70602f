//! How far a running job got: what its handler reports, and who reads it.

use std::fmt;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// The longest progress message kept, in bytes (cut at a character
/// boundary), so a heartbeat listing many running jobs stays small.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 200;

/// How far a running job got, as its handler last reported it.
///
/// ```
/// use queuey_core::control::Progress;
///
/// let progress = Progress::new(140, "copied 7 of 7 files\n");
/// assert_eq!(progress.percent, 100, "a percentage past 100 is 100");
/// assert_eq!(progress.message, "copied 7 of 7 files ", "control characters become spaces");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// How much of the work is done, from 0 to 100.
    pub percent: u8,
    /// What the handler said of it; empty when it said nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Progress {
    /// Progress of `percent` (at most 100) with `message` (at most
    /// [`MAX_PROGRESS_MESSAGE_BYTES`], control characters made spaces).
    pub fn new(percent: u8, message: &str) -> Progress {
        let mut end = message.len().min(MAX_PROGRESS_MESSAGE_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let message = message[..end]
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        Progress {
            percent: percent.min(100),
            message,
        }
    }
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent)?;
        if !self.message.is_empty() {
            write!(f, " {}", self.message)?;
        }
        Ok(())
    }
}

/// Where a running job's handler reports its [`Progress`]
/// ([`JobContext::progress`](crate::JobContext::progress)), shown in the
/// worker's heartbeats and sent to a waiting caller. A report replaces the
/// one before; a [`never`](ProgressReporter::never) reporter (the default)
/// drops every report without allocating. In a handler's unit test:
///
/// ```
/// use queuey_core::control::{Progress, ProgressReporter};
/// use queuey_core::{JobContext, Uuid};
///
/// let reporter = ProgressReporter::new();
/// let ctx = JobContext::new(Uuid::new_v4(), "app.exports").with_progress(reporter.clone());
/// ctx.progress(40, "4 of 10 chunks");
/// assert_eq!(reporter.latest(), Some(Progress::new(40, "4 of 10 chunks")));
/// ```
#[derive(Clone, Default)]
pub struct ProgressReporter {
    latest: Option<watch::Sender<Option<Progress>>>,
}

impl ProgressReporter {
    /// A reporter that keeps the latest report.
    pub fn new() -> ProgressReporter {
        ProgressReporter::channel().0
    }

    /// A reporter that keeps the latest report, and its reports as they
    /// are made.
    pub fn channel() -> (ProgressReporter, ProgressUpdates) {
        let (sender, receiver) = watch::channel(None);
        let reporter = ProgressReporter {
            latest: Some(sender),
        };
        (reporter, ProgressUpdates { receiver })
    }

    /// A reporter that drops every report (the default).
    pub fn never() -> ProgressReporter {
        ProgressReporter { latest: None }
    }

    /// Reports `percent` done (at most 100), with `message` (may be empty).
    /// Costs nothing on a reporter that drops reports.
    pub fn report(&self, percent: u8, message: &str) {
        if self.latest.is_some() {
            self.set(Progress::new(percent, message));
        }
    }

    /// Reports `progress` as it is (a backend passing on a report that
    /// came for a waiting caller).
    pub fn set(&self, progress: Progress) {
        if let Some(latest) = &self.latest {
            latest.send_replace(Some(progress));
        }
    }

    /// The latest report, if any.
    pub fn latest(&self) -> Option<Progress> {
        self.latest
            .as_ref()
            .and_then(|latest| latest.borrow().clone())
    }
}

/// Every reporter is equal: contexts compare by bookkeeping, not reports.
impl PartialEq for ProgressReporter {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ProgressReporter {}

impl fmt::Debug for ProgressReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressReporter")
            .field("latest", &self.latest())
            .finish()
    }
}

/// The reports of one [`ProgressReporter`] as they are made
/// ([`ProgressReporter::channel`]). A clone has seen the reports its
/// original saw.
#[derive(Debug, Clone)]
pub struct ProgressUpdates {
    receiver: watch::Receiver<Option<Progress>>,
}

impl ProgressUpdates {
    /// The latest report made since the last call (others are skipped);
    /// `None` once every reporter is dropped.
    pub async fn next(&mut self) -> Option<Progress> {
        loop {
            self.receiver.changed().await.ok()?;
            if let Some(progress) = self.receiver.borrow_and_update().clone() {
                return Some(progress);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_bounded_at_a_character_boundary() {
        let long = "é".repeat(MAX_PROGRESS_MESSAGE_BYTES);
        let progress = Progress::new(5, &long);
        assert!(progress.message.len() <= MAX_PROGRESS_MESSAGE_BYTES);
        assert_eq!(progress.message.len(), MAX_PROGRESS_MESSAGE_BYTES);
        assert!(progress.message.chars().all(|c| c == 'é'));
        assert_eq!(Progress::new(5, "").to_string(), "5%");
        assert_eq!(Progress::new(5, "half").to_string(), "5% half");
    }

    #[test]
    fn progress_is_small_json_without_an_empty_message() {
        let bare = serde_json::to_string(&Progress::new(30, "")).unwrap();
        assert_eq!(bare, r#"{"percent":30}"#);
        let said: Progress = serde_json::from_str(r#"{"percent":30,"message":"x"}"#).unwrap();
        assert_eq!(said, Progress::new(30, "x"));
    }

    #[tokio::test]
    async fn updates_see_the_latest_report_and_end_with_the_reporter() {
        let (reporter, mut updates) = ProgressReporter::channel();
        reporter.report(10, "a");
        reporter.report(20, "b");
        assert_eq!(updates.next().await, Some(Progress::new(20, "b")));
        let handler = reporter.clone();
        tokio::spawn(async move { handler.report(30, "") });
        assert_eq!(updates.next().await, Some(Progress::new(30, "")));
        drop(reporter);
        assert_eq!(updates.next().await, None);
    }

    #[test]
    fn a_reporter_that_drops_reports_keeps_nothing() {
        let never = ProgressReporter::never();
        never.report(50, "x");
        assert_eq!(never.latest(), None);
    }
}
