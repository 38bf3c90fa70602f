//! The response future of [`Idempotency`](super::Idempotency).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::future::BoxFuture;
use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::claim::{Claim, Verdict};
use crate::JobRequest;

pin_project! {
    /// The response future of [`Idempotency`](super::Idempotency).
    pub struct ResponseFuture<S, J, F> {
        #[pin]
        state: State<S, J, F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, J, F> {
        /// Asking the store about the job; the service (ready) and the
        /// request wait for its answer.
        Checking {
            check: BoxFuture<'static, Verdict>,
            service: Option<S>,
            request: Option<JobRequest<J>>,
        },
        /// Running without a claim: the store failed.
        Unguarded { #[pin] inner: F },
        /// Running with a claim, renewed every third of the lease.
        Claimed {
            #[pin]
            inner: F,
            #[pin]
            next_renewal: Sleep,
            renewal: Option<BoxFuture<'static, ()>>,
            claim: Option<Claim>,
        },
        /// Recording the outcome and releasing the claim, then answering.
        Finishing {
            finish: BoxFuture<'static, ()>,
            answer: Option<Result<Disposition, BoxError>>,
        },
    }
}

impl<S, J, F> ResponseFuture<S, J, F> {
    pub(super) fn new(
        check: BoxFuture<'static, Verdict>,
        service: S,
        request: JobRequest<J>,
    ) -> Self {
        ResponseFuture {
            state: State::Checking {
                check,
                service: Some(service),
                request: Some(request),
            },
        }
    }
}

impl<S, J, F> fmt::Debug for ResponseFuture<S, J, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Checking { .. } => "checking",
            State::Unguarded { .. } => "unguarded",
            State::Claimed { .. } => "claimed",
            State::Finishing { .. } => "finishing",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

fn polled_again() -> BoxError {
    "the idempotency layer's future was polled after it answered".into()
}

impl<S, J, F> Future for ResponseFuture<S, J, F>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError, Future = F>,
    F: Future<Output = Result<Disposition, BoxError>>,
{
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Checking {
                    check,
                    service,
                    request,
                } => {
                    let verdict = ready!(check.as_mut().poll(cx));
                    let (Some(mut service), Some(request)) = (service.take(), request.take())
                    else {
                        return Poll::Ready(Err(polled_again()));
                    };
                    match verdict {
                        Verdict::Done => return Poll::Ready(Ok(Disposition::Ack)),
                        Verdict::Busy(delay) => {
                            return Poll::Ready(Ok(Disposition::Defer { delay }));
                        }
                        Verdict::Unguarded => state.set(State::Unguarded {
                            inner: service.call(request),
                        }),
                        Verdict::Run(claim) => state.set(State::Claimed {
                            inner: service.call(request),
                            next_renewal: tokio::time::sleep(claim.renew_every()),
                            renewal: None,
                            claim: Some(claim),
                        }),
                    }
                }
                StateProj::Unguarded { inner } => return inner.poll(cx),
                StateProj::Claimed {
                    inner,
                    mut next_renewal,
                    renewal,
                    claim,
                } => {
                    if let Poll::Ready(answer) = inner.poll(cx) {
                        let Some(claim) = claim.take() else {
                            return Poll::Ready(Err(polled_again()));
                        };
                        let acked = matches!(answer, Ok(Disposition::Ack));
                        state.set(State::Finishing {
                            finish: claim.finish(acked),
                            answer: Some(answer),
                        });
                        continue;
                    }
                    if let Some(running) = renewal
                        && running.as_mut().poll(cx).is_ready()
                    {
                        *renewal = None;
                    }
                    if next_renewal.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let Some(claim) = claim.as_ref() else {
                        return Poll::Pending;
                    };
                    next_renewal
                        .as_mut()
                        .reset(Instant::now() + claim.renew_every());
                    // A renewal still waiting for the store is left to
                    // finish; the next one starts a period later.
                    if renewal.is_none() {
                        *renewal = Some(claim.renew());
                    }
                }
                StateProj::Finishing { finish, answer } => {
                    ready!(finish.as_mut().poll(cx));
                    return Poll::Ready(answer.take().unwrap_or_else(|| Err(polled_again())));
                }
            }
        }
    }
}
