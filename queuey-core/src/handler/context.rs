//! What a handler knows about the delivery it is working on.

use std::sync::Arc;

use uuid::Uuid;

use crate::Envelope;
use crate::control::{CancelSignal, ProgressReporter};

/// The bookkeeping of one delivery of a job, handed to the handler next to
/// the job itself.
///
/// Workers build it from the envelope; tests can build their own with
/// [`JobContext::new`] and the `with_*` setters.
///
/// ```
/// use queuey_core::JobContext;
/// use uuid::Uuid;
///
/// let ctx = JobContext::new(Uuid::new_v4(), "app.emails")
///     .with_attempt(3)
///     .with_max_attempts(3);
/// assert!(ctx.is_last_attempt());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobContext {
    job_id: Uuid,
    queue: Arc<str>,
    attempt: u32,
    max_attempts: u32,
    deferrals: u32,
    priority: u8,
    redelivered: bool,
    correlation_id: Option<String>,
    enqueued_at_ms: u64,
    deadline_ms: Option<u64>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    cancel: CancelSignal,
    progress: ProgressReporter,
    shard: Option<u16>,
}

impl JobContext {
    /// A first attempt of the given job on the given queue, of one allowed,
    /// never deferred, priority 0, not redelivered.
    pub fn new(job_id: Uuid, queue: impl Into<Arc<str>>) -> Self {
        JobContext {
            job_id,
            queue: queue.into(),
            attempt: 1,
            max_attempts: 1,
            deferrals: 0,
            priority: 0,
            redelivered: false,
            correlation_id: None,
            enqueued_at_ms: 0,
            deadline_ms: None,
            traceparent: None,
            tracestate: None,
            cancel: CancelSignal::never(),
            progress: ProgressReporter::never(),
            shard: None,
        }
    }

    /// The context of a delivered envelope. `queue` (shared by a consumer's
    /// jobs, so nothing is copied) is the logical queue: for a job taken from
    /// shard `{queue}.s{n}`, [`shard`](JobContext::shard) is `n`.
    pub fn from_envelope(
        envelope: &Envelope,
        queue: Arc<str>,
        max_attempts: u32,
        redelivered: bool,
    ) -> Self {
        let shard = (envelope.queue.len() != queue.len())
            .then(|| crate::shard::parse_shard_name(&envelope.queue))
            .flatten()
            .filter(|(base, _)| *base == &*queue)
            .map(|(_, index)| index);
        JobContext {
            shard,
            attempt: envelope.attempt,
            max_attempts,
            deferrals: envelope.deferrals,
            priority: envelope.priority,
            redelivered,
            correlation_id: envelope.correlation_id.clone(),
            enqueued_at_ms: envelope.enqueued_at_ms,
            deadline_ms: envelope.deadline_ms,
            traceparent: envelope.traceparent.clone(),
            tracestate: envelope.tracestate.clone(),
            ..JobContext::new(envelope.job_id, queue)
        }
    }

    /// Sets the signal that tells the handler its job was cancelled (the
    /// worker sets one on every job it runs).
    pub fn with_cancel_signal(mut self, signal: CancelSignal) -> Self {
        self.cancel = signal;
        self
    }

    /// The signal that trips when an operator cancels this job while it
    /// runs: await [`CancelSignal::cancelled`] beside the work, or look at
    /// [`is_cancelled`](JobContext::is_cancelled) between steps; a handler
    /// that ignores it runs to its end.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queuey_core::{JobContext, JobError, Uuid};
    /// use queuey_core::control::CancelSignal;
    ///
    /// async fn export(ctx: JobContext) -> Result<(), JobError> {
    ///     for _chunk in 0..1_000 {
    ///         if ctx.is_cancelled() {
    ///             // Stop between chunks; the job is dead-lettered as cancelled.
    ///             return Err(JobError::fatal("cancelled by an operator"));
    ///         }
    ///         // ... write one chunk ...
    ///     }
    ///     Ok(())
    /// }
    ///
    /// let (signal, cancel) = CancelSignal::new();
    /// cancel.cancel();
    /// let ctx = JobContext::new(Uuid::new_v4(), "app.exports").with_cancel_signal(signal);
    /// assert!(export(ctx).await.is_err());
    /// # }
    /// ```
    pub fn cancel_signal(&self) -> &CancelSignal {
        &self.cancel
    }

    /// Whether an operator cancelled this job while it runs.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Sets where the handler's [`progress`](JobContext::progress) reports
    /// go (the worker sets one on a job whose progress someone can see).
    pub fn with_progress(mut self, reporter: ProgressReporter) -> Self {
        self.progress = reporter;
        self
    }

    /// Reports how far the job got: `percent` done (at most 100) and a
    /// short `message` (may be empty; at most
    /// [`MAX_PROGRESS_MESSAGE_BYTES`](crate::control::MAX_PROGRESS_MESSAGE_BYTES)
    /// are kept).
    ///
    /// Operators see the latest report beside the running job (`queuey
    /// workers`, the dashboard), and a caller of
    /// [`Producer::enqueue_and_watch`](crate::Producer::enqueue_and_watch)
    /// receives it. Each replaces the one before; report as often as useful:
    /// one nobody can see costs nothing, and a waiting caller gets the latest
    /// as fast as the worker can send it, skipping those it could not.
    ///
    /// ```
    /// use queuey_core::{JobContext, JobError};
    ///
    /// async fn export(ctx: JobContext, chunks: u32) -> Result<(), JobError> {
    ///     for done in 1..=chunks {
    ///         // ... write one chunk ...
    ///         let percent = (done * 100 / chunks) as u8;
    ///         ctx.progress(percent, &format!("{done} of {chunks} chunks"));
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn progress(&self, percent: u8, message: &str) {
        self.progress.report(percent, message);
    }

    crate::setters! {
        /// Sets the attempt (1-based).
        with_attempt(attempt: u32);
        /// Sets the number of attempts allowed.
        with_max_attempts(max_attempts: u32);
        /// Sets the number of earlier deferrals.
        with_deferrals(deferrals: u32);
        /// Sets the priority.
        with_priority(priority: u8);
        /// Marks the delivery as redelivered.
        with_redelivered(redelivered: bool);
        /// Sets when the job was first enqueued, in ms since the Unix epoch.
        with_enqueued_at_ms(enqueued_at_ms: u64);
    }

    /// Records the number of attempts allowed, in place (a retry layer does
    /// this when its own policy applies).
    pub fn set_max_attempts(&mut self, max_attempts: u32) {
        self.max_attempts = max_attempts;
    }

    /// Sets the correlation id.
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// Sets the W3C trace context the job was enqueued under.
    pub fn with_trace_context(
        mut self,
        traceparent: impl Into<String>,
        tracestate: Option<String>,
    ) -> Self {
        self.traceparent = Some(traceparent.into());
        self.tracestate = tracestate;
        self
    }

    /// The W3C `traceparent` of the span that enqueued the job, if any.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }

    /// The W3C `tracestate` that goes with [`traceparent`](Self::traceparent).
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// Sets the deadline, in ms since the Unix epoch.
    pub fn with_deadline_ms(mut self, deadline_ms: u64) -> Self {
        self.deadline_ms = Some(deadline_ms);
        self
    }

    crate::getters! {
        /// The job's deadline, if the producer gave one (in ms since the Unix
        /// epoch).
        deadline_ms: Option<u64>;
        /// The job's id, the same on every attempt.
        job_id: Uuid;
        /// The shard of a [sharded](crate::QueueConfig::shards) queue the job
        /// was taken from; `None` for an unsharded queue and for its lane.
        shard: Option<u16>;
        /// This attempt, starting at 1.
        attempt: u32;
        /// The attempts the job's retry policy allows, the first included.
        max_attempts: u32;
        /// How often the job was deferred before.
        deferrals: u32;
        /// The priority the job was delivered with.
        priority: u8;
        /// Whether the broker delivered this message before (to a consumer that
        /// did not settle it, for example because its process died).
        redelivered: bool;
        /// When the job was first enqueued, in ms since the Unix epoch.
        enqueued_at_ms: u64;
    }

    /// The job's deadline, if the producer gave one.
    pub fn deadline(&self) -> Option<std::time::SystemTime> {
        self.deadline_ms
            .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    }

    /// The time left until the deadline (zero once it passed), or `None` for
    /// a job without one. A handler can spend it on its own calls' timeouts.
    pub fn remaining(&self) -> Option<std::time::Duration> {
        let deadline = self.deadline_ms?;
        Some(std::time::Duration::from_millis(
            deadline.saturating_sub(crate::clock::now_ms()),
        ))
    }

    /// The queue the job was delivered from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The shared queue name.
    pub fn queue_arc(&self) -> &Arc<str> {
        &self.queue
    }

    /// Whether a failure now is final.
    pub fn is_last_attempt(&self) -> bool {
        self.attempt >= self.max_attempts
    }

    /// The correlation id given at enqueue time.
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_envelope_copies_the_bookkeeping() {
        let payload = serde_json::value::to_raw_value(&1).unwrap();
        let mut env = Envelope::new("t", "q", payload)
            .with_priority(7)
            .with_correlation_id("c");
        env.attempt = 2;
        env.deferrals = 3;
        let ctx = JobContext::from_envelope(&env, Arc::from("q"), 5, true);
        assert_eq!(ctx.job_id(), env.job_id);
        assert_eq!(ctx.queue(), "q");
        assert_eq!(
            (ctx.attempt(), ctx.max_attempts(), ctx.deferrals()),
            (2, 5, 3)
        );
        assert_eq!(ctx.priority(), 7);
        assert!(ctx.redelivered());
        assert_eq!(ctx.correlation_id(), Some("c"));
        assert_eq!(ctx.enqueued_at_ms(), env.enqueued_at_ms);
        assert!(!ctx.is_last_attempt());
    }

    #[test]
    fn builders() {
        let id = Uuid::new_v4();
        let ctx = JobContext::new(id, "q")
            .with_attempt(2)
            .with_max_attempts(4)
            .with_deferrals(1)
            .with_priority(9)
            .with_redelivered(true)
            .with_correlation_id("x")
            .with_enqueued_at_ms(5);
        assert_eq!(ctx.job_id(), id);
        assert_eq!(ctx.attempt(), 2);
        assert_eq!(ctx.max_attempts(), 4);
        assert_eq!(ctx.deferrals(), 1);
        assert_eq!(ctx.priority(), 9);
        assert!(ctx.redelivered());
        assert_eq!(ctx.correlation_id(), Some("x"));
        assert_eq!(ctx.enqueued_at_ms(), 5);
    }
}
