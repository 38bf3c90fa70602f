//! The response future of [`Limit`](super::Limit).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::future::BoxFuture;
use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::admit::{Admission, Held};
use crate::JobRequest;

pin_project! {
    /// The response future of [`Limit`](super::Limit).
    pub struct ResponseFuture<S, J, F> {
        #[pin]
        state: State<S, J, F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, J, F> {
        /// Running with no slot to hold: a job without a key, a layer
        /// without a concurrency limit, or a store that failed open.
        Passed { #[pin] inner: F },
        /// Asking the store for the job's turn and slot; the service
        /// (ready) and the request wait for its answer.
        Admitting {
            admit: BoxFuture<'static, Admission>,
            service: Option<S>,
            request: Option<JobRequest<J>>,
        },
        /// Running with a slot, renewed every third of the lease until a
        /// renewal finds it gone (`lost`).
        Holding {
            #[pin]
            inner: F,
            #[pin]
            next_renewal: Sleep,
            renewal: Option<BoxFuture<'static, bool>>,
            lost: bool,
            slot: Option<Held>,
        },
        /// Freeing the slot, then answering.
        Freeing {
            free: BoxFuture<'static, ()>,
            answer: Option<Result<Disposition, BoxError>>,
        },
    }
}

impl<S, J, F> ResponseFuture<S, J, F> {
    pub(super) fn passed(inner: F) -> Self {
        ResponseFuture {
            state: State::Passed { inner },
        }
    }

    pub(super) fn admitting(
        admit: BoxFuture<'static, Admission>,
        service: S,
        request: JobRequest<J>,
    ) -> Self {
        ResponseFuture {
            state: State::Admitting {
                admit,
                service: Some(service),
                request: Some(request),
            },
        }
    }
}

impl<S, J, F> fmt::Debug for ResponseFuture<S, J, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Passed { .. } => "passed",
            State::Admitting { .. } => "admitting",
            State::Holding { .. } => "holding",
            State::Freeing { .. } => "freeing",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

fn polled_again() -> BoxError {
    "the limit layer's future was polled after it answered".into()
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
                StateProj::Passed { inner } => return inner.poll(cx),
                StateProj::Admitting {
                    admit,
                    service,
                    request,
                } => {
                    let admission = ready!(admit.as_mut().poll(cx));
                    let (Some(mut service), Some(request)) = (service.take(), request.take())
                    else {
                        return Poll::Ready(Err(polled_again()));
                    };
                    match admission {
                        Admission::Wait(delay) => {
                            request.note_limit_wait();
                            return Poll::Ready(Ok(Disposition::Defer { delay }));
                        }
                        Admission::Run(None) => state.set(State::Passed {
                            inner: service.call(request),
                        }),
                        Admission::Run(Some(slot)) => state.set(State::Holding {
                            inner: service.call(request),
                            next_renewal: tokio::time::sleep(slot.renew_every()),
                            renewal: None,
                            lost: false,
                            slot: Some(slot),
                        }),
                    }
                }
                StateProj::Holding {
                    inner,
                    mut next_renewal,
                    renewal,
                    lost,
                    slot,
                } => {
                    if let Poll::Ready(answer) = inner.poll(cx) {
                        let Some(slot) = slot.take() else {
                            return Poll::Ready(Err(polled_again()));
                        };
                        state.set(State::Freeing {
                            free: slot.free(),
                            answer: Some(answer),
                        });
                        continue;
                    }
                    if let Some(running) = renewal
                        && let Poll::Ready(kept) = running.as_mut().poll(cx)
                    {
                        *renewal = None;
                        *lost = !kept;
                    }
                    if *lost || next_renewal.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let Some(slot) = slot.as_ref() else {
                        return Poll::Pending;
                    };
                    next_renewal
                        .as_mut()
                        .reset(Instant::now() + slot.renew_every());
                    // A renewal still waiting for the store is left to
                    // finish; the next one starts a period later.
                    if renewal.is_none() {
                        *renewal = Some(slot.renew());
                    }
                }
                StateProj::Freeing { free, answer } => {
                    ready!(free.as_mut().poll(cx));
                    return Poll::Ready(answer.take().unwrap_or_else(|| Err(polled_again())));
                }
            }
        }
    }
}
