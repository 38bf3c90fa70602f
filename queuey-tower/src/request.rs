//! The request every service in a worker stack receives.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use queuey_core::{JobContext, RetryPolicy};

use crate::classifier::SharedClassifier;
use crate::failure_slot::FailureSlot;
use crate::reply_slot::ReplySlot;

/// One delivery of a job, decoded: the job, its [`JobContext`], the retry
/// policy that applies to it when the job type or its queue sets one, and
/// the classifier every layer reads (see [`classify`](crate::classify)).
///
/// Workers build requests; tests of a layer or a whole stack can build their
/// own with [`JobRequest::new`].
///
/// ```
/// use queuey_core::{JobContext, Uuid};
/// use queuey_tower::JobRequest;
///
/// let request = JobRequest::new("payload", JobContext::new(Uuid::new_v4(), "app.emails"));
/// assert_eq!(request.ctx().attempt(), 1);
/// assert!(request.retry_policy().is_none());
/// ```
#[derive(Debug, Clone)]
pub struct JobRequest<J> {
    job: J,
    ctx: JobContext,
    retry: Option<Arc<RetryPolicy>>,
    classifier: SharedClassifier,
    /// Where the handler's output goes, for a job a caller waits for.
    reply: Option<ReplySlot>,
    /// Where a retry layer notes the error of an attempt it retries.
    failure: Option<FailureSlot>,
    /// The job type's name, for log lines; `None` for a request built by hand.
    job_type: Option<&'static str>,
    /// Raised by a limit layer that defers the job, for a cool-down
    /// around it to tell a limit's wait from the API's.
    limit_wait: Option<Arc<AtomicBool>>,
}

impl<J> JobRequest<J> {
    /// A request for `job` with no retry policy of its own and the
    /// [`DefaultClassifier`](crate::classify::DefaultClassifier).
    pub fn new(job: J, ctx: JobContext) -> Self {
        JobRequest {
            job,
            ctx,
            retry: None,
            classifier: SharedClassifier::default(),
            reply: None,
            failure: None,
            job_type: None,
            limit_wait: None,
        }
    }

    /// Asks a limit layer inside to raise `flag` if it defers the job
    /// for its limit (a wait of queuey's own, not one the handler was told).
    pub(crate) fn watch_limit_wait(&mut self, flag: Arc<AtomicBool>) {
        self.limit_wait = Some(flag);
    }

    /// What a limit layer raises when it defers the job for its limit, if
    /// someone watches.
    pub(crate) fn limit_wait_flag(&self) -> Option<Arc<AtomicBool>> {
        self.limit_wait.clone()
    }

    /// Names the request's job type, for the layers' log lines.
    pub(crate) fn set_job_type(&mut self, name: &'static str) {
        self.job_type = Some(name);
    }

    /// The job type's name, when the worker gave it.
    pub(crate) fn job_type(&self) -> Option<&'static str> {
        self.job_type
    }

    /// Gives the request the worker's slots for the handler's output and
    /// for the error of an attempt a retry layer retries.
    pub(crate) fn set_slots(&mut self, reply: Option<ReplySlot>, failure: Option<FailureSlot>) {
        self.reply = reply;
        self.failure = failure;
    }

    /// The slot a retry layer notes its error in, when the worker gave one.
    pub(crate) fn failure(&self) -> Option<&FailureSlot> {
        self.failure.as_ref()
    }

    /// Splits the request into the job, its context and its reply slot.
    pub(crate) fn into_parts_with_reply(self) -> (J, JobContext, Option<ReplySlot>) {
        (self.job, self.ctx, self.reply)
    }

    /// The classifier the layers use to decide what an error means.
    pub fn classifier(&self) -> &SharedClassifier {
        &self.classifier
    }

    /// Sets the classifier (a worker sets its own on every request; a
    /// [`ClassifyLayer`](crate::classify::ClassifyLayer) overrides it).
    pub(crate) fn set_classifier(&mut self, classifier: SharedClassifier) {
        self.classifier = classifier;
    }

    /// Sets the retry policy that applies to this job (the job type's, else
    /// its queue's). A retry layer uses it in preference to its own.
    pub fn with_retry_policy(mut self, policy: Arc<RetryPolicy>) -> Self {
        self.retry = Some(policy);
        self
    }

    /// The job.
    pub fn job(&self) -> &J {
        &self.job
    }

    /// The job, mutably.
    pub fn job_mut(&mut self) -> &mut J {
        &mut self.job
    }

    /// The delivery's context.
    pub fn ctx(&self) -> &JobContext {
        &self.ctx
    }

    /// The delivery's context, mutably (a retry layer records the attempts it
    /// allows here).
    pub fn ctx_mut(&mut self) -> &mut JobContext {
        &mut self.ctx
    }

    /// The job type's or queue's retry policy, if either sets one.
    pub fn retry_policy(&self) -> Option<&Arc<RetryPolicy>> {
        self.retry.as_ref()
    }

    /// Splits the request into the job and its context.
    pub fn into_parts(self) -> (J, JobContext) {
        (self.job, self.ctx)
    }
}
