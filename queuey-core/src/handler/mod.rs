//! Handlers: the code that runs a job.

mod context;
mod error;

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

pub use context::JobContext;
pub use error::{DeferredError, FatalError, JobError, RetryableError};

use crate::Job;

/// Runs jobs of one type.
///
/// Implement it with a plain `async fn`; the future must be `Send` because
/// workers run many jobs at once. A handler is shared by all of them, so it
/// takes `&self`.
///
/// ```
/// use queuey_core::{Job, JobContext, JobError, JobHandler, Queues};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Emails,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Emails)]
/// struct SendEmail {
///     to: String,
/// }
///
/// struct EmailHandler;
///
/// impl JobHandler for EmailHandler {
///     type Job = SendEmail;
///
///     async fn handle(&self, job: SendEmail, ctx: JobContext) -> Result<(), JobError> {
///         if job.to.is_empty() {
///             return Err(JobError::fatal("no recipient"));
///         }
///         println!("attempt {} of {}: mail to {}", ctx.attempt(), ctx.max_attempts(), job.to);
///         Ok(())
///     }
/// }
/// ```
pub trait JobHandler: Send + Sync + 'static {
    /// The job type this handler runs.
    type Job: Job;

    /// Runs one job. `Ok` acknowledges it, and its value (the job's
    /// [`Output`](Job::Output), `()` for most jobs) goes back to a caller
    /// that waits for the job; see [`JobError`] for what each error does.
    fn handle(
        &self,
        job: Self::Job,
        ctx: JobContext,
    ) -> impl Future<Output = Result<<Self::Job as Job>::Output, JobError>> + Send;
}

/// A shared handler is a handler, so one instance can be handed to a worker
/// while the application keeps a reference to it (to its counters, say).
impl<H: JobHandler> JobHandler for std::sync::Arc<H> {
    type Job = H::Job;

    fn handle(
        &self,
        job: H::Job,
        ctx: JobContext,
    ) -> impl Future<Output = Result<<H::Job as Job>::Output, JobError>> + Send {
        (**self).handle(job, ctx)
    }
}

/// A [`JobHandler`] made from a closure; see [`handler_fn`].
pub struct FnHandler<J, F> {
    f: F,
    _job: PhantomData<fn(J)>,
}

/// Makes a handler from an async closure taking the job and its context,
/// answering with the job's [`Output`](Job::Output) (`()` for most jobs).
///
/// ```
/// use queuey_core::{handler_fn, Job, JobContext, JobError, JobHandler, Queues};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Default,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Default)]
/// struct Ping;
///
/// let handler = handler_fn(|_job: Ping, _ctx: JobContext| async { Ok::<(), JobError>(()) });
/// # let _ = handler;
/// ```
pub fn handler_fn<J, F, Fut>(f: F) -> FnHandler<J, F>
where
    J: Job,
    F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<J::Output, JobError>> + Send + 'static,
{
    FnHandler {
        f,
        _job: PhantomData,
    }
}

impl<J, F, Fut> JobHandler for FnHandler<J, F>
where
    J: Job,
    F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<J::Output, JobError>> + Send + 'static,
{
    type Job = J;

    fn handle(
        &self,
        job: J,
        ctx: JobContext,
    ) -> impl Future<Output = Result<J::Output, JobError>> + Send {
        (self.f)(job, ctx)
    }
}

impl<J, F: Clone> Clone for FnHandler<J, F> {
    fn clone(&self) -> Self {
        FnHandler {
            f: self.f.clone(),
            _job: PhantomData,
        }
    }
}

impl<J, F> fmt::Debug for FnHandler<J, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnHandler")
            .field("job", &std::any::type_name::<J>())
            .finish_non_exhaustive()
    }
}
