//! Watching a job a caller waits for: its progress, then its outcome.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::time::Instant;
use uuid::Uuid;

use super::outcome::{WaitError, output};
use crate::backend::{PendingReply, Reply, ReplyLost};
use crate::control::Progress;

/// A job being watched
/// ([`Producer::enqueue_and_watch`](crate::Producer::enqueue_and_watch)):
/// [`progress`](JobWatch::progress) yields its handler's reports while it
/// runs, [`output`](JobWatch::output) its final outcome.
///
/// A slow reader sees the latest report, never a backlog. The enqueue's
/// timeout bounds the whole watch.
pub struct JobWatch<O> {
    pending: PendingReply,
    /// The final answer, once it came while progress was awaited.
    answer: Option<Result<Reply, ReplyLost>>,
    deadline: Instant,
    job_id: Uuid,
    job_type: &'static str,
    timeout: Duration,
    output: PhantomData<fn() -> O>,
}

impl<O: DeserializeOwned> JobWatch<O> {
    pub(super) fn new(
        pending: PendingReply,
        deadline: Instant,
        job_id: Uuid,
        job_type: &'static str,
        timeout: Duration,
    ) -> Self {
        JobWatch {
            pending,
            answer: None,
            deadline,
            job_id,
            job_type,
            timeout,
            output: PhantomData,
        }
    }

    /// The watched job's id.
    pub fn job_id(&self) -> Uuid {
        self.job_id
    }

    /// The latest progress report since the last call; `None` once none will
    /// come (outcome in, timeout passed, or no reports passed on): then call
    /// [`output`](JobWatch::output).
    pub async fn progress(&mut self) -> Option<Progress> {
        if self.answer.is_some() {
            return None;
        }
        let updates = self.pending.progress.as_mut()?;
        let answer = &mut self.pending.answer;
        tokio::select! {
            biased;
            answer = answer => {
                self.answer = Some(answer);
                None
            }
            Some(progress) = updates.next() => Some(progress),
            () = tokio::time::sleep_until(self.deadline) => None,
        }
    }

    /// The job's final outcome, as
    /// [`enqueue_and_wait`](crate::Producer::enqueue_and_wait) returns it.
    pub async fn output(self) -> Result<O, WaitError> {
        let answer = match self.answer {
            Some(answer) => answer,
            None => match tokio::time::timeout_at(self.deadline, self.pending).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(WaitError::TimedOut {
                        job_id: self.job_id,
                        job_type: self.job_type,
                        timeout: self.timeout,
                    });
                }
            },
        };
        match answer {
            Ok(reply) => output(reply, self.job_id, self.job_type),
            Err(lost) => Err(WaitError::ReplyLost {
                job_id: self.job_id,
                job_type: self.job_type,
                reason: lost.reason().to_owned(),
            }),
        }
    }
}

impl<O> fmt::Debug for JobWatch<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobWatch")
            .field("job_id", &self.job_id)
            .field("job_type", &self.job_type)
            .field("answered", &self.answer.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ProgressReporter;

    fn watch(pending: PendingReply, timeout: Duration) -> JobWatch<u32> {
        JobWatch::new(
            pending,
            Instant::now() + timeout,
            Uuid::new_v4(),
            "t",
            timeout,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn reports_come_until_the_outcome_and_the_outcome_is_kept() {
        let (reporter, updates) = ProgressReporter::channel();
        let (answer, receiver) = tokio::sync::oneshot::channel();
        let pending =
            PendingReply::new(async move { receiver.await.unwrap() }).with_progress(updates);
        let mut watch = watch(pending, Duration::from_secs(60));
        reporter.report(10, "");
        reporter.report(20, "later");
        assert_eq!(watch.progress().await, Some(Progress::new(20, "later")));
        let value = serde_json::value::to_raw_value(&7u32).unwrap();
        answer.send(Ok(Reply::Value(value))).unwrap();
        reporter.report(30, "after the outcome");
        assert_eq!(watch.progress().await, None, "the outcome comes first");
        assert_eq!(watch.progress().await, None);
        assert_eq!(watch.output().await.unwrap(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn the_timeout_ends_the_reports_and_the_wait() {
        let (_reporter, updates) = ProgressReporter::channel();
        let pending = PendingReply::new(std::future::pending()).with_progress(updates);
        let mut watch = watch(pending, Duration::from_secs(3));
        let started = Instant::now();
        assert_eq!(watch.progress().await, None);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        let error = watch.output().await.unwrap_err();
        assert!(matches!(error, WaitError::TimedOut { .. }), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn without_reports_the_watch_is_a_wait() {
        let pending = PendingReply::new(async { Err(ReplyLost::new("the link dropped")) });
        let mut watch = watch(pending, Duration::from_secs(3));
        assert_eq!(watch.progress().await, None);
        let error = watch.output().await.unwrap_err();
        assert!(
            matches!(&error, WaitError::ReplyLost { reason, .. } if reason == "the link dropped"),
            "{error}"
        );
    }
}
