//! Turning a [`JobHandler`] into the innermost service of a stack.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::FutureExt;
use futures::future::{BoxFuture, CatchUnwind};
use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition, JobError, JobHandler};
use tower_service::Service;

use crate::JobRequest;

/// The innermost service of a worker stack: runs a [`JobHandler`].
///
/// `Ok(output)` becomes [`Disposition::Ack`] (the output goes to a waiting
/// caller, else is dropped unserialized); a [`JobError`] becomes the boxed
/// error that keeps its intent ([`JobError::into_box_error`]). A panic is
/// caught as a transient [`HandlerPanicked`] error: the job is retried, and
/// the worker keeps running.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queuey_core::{JobContext, JobError, JobHandler, Uuid};
/// use queuey_core::Disposition;
/// use queuey_tower::{HandlerService, JobRequest};
/// use tower::ServiceExt;
/// # use queuey_core::{Job, Queues};
/// # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)] enum Q { Default }
/// # #[derive(Job, serde::Serialize, serde::Deserialize)] #[job(queue = Q::Default)] struct Ping;
///
/// struct PingHandler;
/// impl JobHandler for PingHandler {
///     type Job = Ping;
///     async fn handle(&self, _job: Ping, _ctx: JobContext) -> Result<(), JobError> {
///         Ok(())
///     }
/// }
///
/// let service = HandlerService::new(PingHandler);
/// let request = JobRequest::new(Ping, JobContext::new(Uuid::new_v4(), "default"));
/// assert_eq!(service.oneshot(request).await.unwrap(), Disposition::Ack);
/// # }
/// ```
pub struct HandlerService<H> {
    handler: Arc<H>,
}

impl<H> HandlerService<H> {
    /// Wraps a handler.
    pub fn new(handler: H) -> Self {
        HandlerService {
            handler: Arc::new(handler),
        }
    }

    /// Wraps a handler that is already shared.
    pub fn from_arc(handler: Arc<H>) -> Self {
        HandlerService { handler }
    }

    /// The handler.
    pub fn get_ref(&self) -> &H {
        &self.handler
    }
}

impl<H> Clone for HandlerService<H> {
    fn clone(&self) -> Self {
        HandlerService {
            handler: Arc::clone(&self.handler),
        }
    }
}

impl<H> fmt::Debug for HandlerService<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerService")
            .field("handler", &std::any::type_name::<H>())
            .finish()
    }
}

impl<H: JobHandler> Service<JobRequest<H::Job>> for HandlerService<H> {
    type Response = Disposition;
    type Error = BoxError;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: JobRequest<H::Job>) -> Self::Future {
        let handler = Arc::clone(&self.handler);
        let (job, ctx, reply) = request.into_parts_with_reply();
        // Boxed once here (an unnameable `impl Future`); the layers add no
        // allocation. The output is serialized only into a reply slot.
        let future: BoxFuture<'static, Result<(), JobError>> = Box::pin(async move {
            let output = handler.handle(job, ctx).await?;
            if let Some(slot) = reply {
                slot.fill(&output);
            }
            Ok(())
        });
        HandlerFuture {
            inner: AssertUnwindSafe(future).catch_unwind(),
        }
    }
}

pin_project! {
    /// The response future of [`HandlerService`].
    pub struct HandlerFuture {
        #[pin]
        inner: CatchUnwind<AssertUnwindSafe<BoxFuture<'static, Result<(), JobError>>>>,
    }
}

impl Future for HandlerFuture {
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().inner.poll(cx)) {
            Ok(Ok(())) => Ok(Disposition::Ack),
            Ok(Err(error)) => Err(error.into_box_error()),
            Err(panic) => Err(Box::new(HandlerPanicked::new(&*panic))),
        })
    }
}

impl fmt::Debug for HandlerFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuture").finish_non_exhaustive()
    }
}

/// Turns a [`JobHandler`] into the innermost service of a stack, so a
/// handler goes straight into `ServiceBuilder::service`:
///
/// ```
/// use queuey_core::{handler_fn, JobContext, JobError};
/// use queuey_tower::defer::DeferOn429;
/// use queuey_tower::HandlerExt;
/// use queuey_tower::retry::RetryLayer;
/// use tower::ServiceBuilder;
/// # use queuey_core::{Job, Queues};
/// # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)] enum Q { Default }
/// # #[derive(Job, serde::Serialize, serde::Deserialize)] #[job(queue = Q::Default)] struct Ping;
///
/// let handler = handler_fn(|_: Ping, _: JobContext| async { Ok::<_, JobError>(()) });
/// let stack = ServiceBuilder::new()
///     .layer(RetryLayer)
///     .layer(DeferOn429)
///     .service(handler.into_service());
/// # let _ = stack;
/// ```
pub trait HandlerExt: JobHandler + Sized {
    /// Wraps the handler in a [`HandlerService`].
    fn into_service(self) -> HandlerService<Self> {
        HandlerService::new(self)
    }
}

impl<H: JobHandler> HandlerExt for H {}

/// A handler panicked; the message is the panic's, when it had one.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the handler panicked: {message}")]
pub struct HandlerPanicked {
    message: String,
}

impl HandlerPanicked {
    fn new(payload: &(dyn Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        HandlerPanicked { message }
    }

    /// The panic message.
    pub fn message(&self) -> &str {
        &self.message
    }
}
