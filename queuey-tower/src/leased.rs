//! A job run under a lease from a store, the one protocol of the layers that
//! hold something in a store while a job runs (a per-key limit's running
//! slot, an idempotency claim):
//!
//! 1. The layer asks the store first. Its answer is a [`Gate`]: answer
//!    without running the job, run it holding nothing, or run it holding a
//!    [`Lease`]. The ready service and the request wait for that answer.
//! 2. While the job runs, the lease is renewed every
//!    [`Lease::renew_every`]. A renewal still waiting for the store is left
//!    to finish and the next one starts a period later; a renewal that finds
//!    the lease gone ends the renewals.
//! 3. When the job answers, the lease is released ([`Lease::release`], which
//!    sees the answer) before the answer is passed on.
//!
//! A lease dropped while held (the future dropped: a shutdown, a timeout
//! outside the layer) releases itself in the background.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::future::BoxFuture;
use pin_project_lite::pin_project;
use queuey_core::{BoxError, Disposition};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use crate::JobRequest;

/// What the store's answer lets a job do.
#[derive(Debug)]
pub(crate) enum Gate<L> {
    /// Answer this without running the job.
    Answer(Disposition),
    /// Run the job holding nothing.
    Run,
    /// Run the job holding `L`.
    Hold(L),
}

/// Something held in a store while a job runs.
pub(crate) trait Lease: Send + 'static {
    /// The layer's name, for the error of a future polled after it answered.
    const LAYER: &'static str;

    /// How often the lease is renewed while the job runs.
    fn renew_every(&self) -> Duration;

    /// Renews the lease; `false` when it was found gone (renewing it again
    /// would find it gone again).
    fn renew(&self) -> BoxFuture<'static, bool>;

    /// Releases the lease once the job answered `answer`.
    fn release(self, answer: &Result<Disposition, BoxError>) -> BoxFuture<'static, ()>;
}

pin_project! {
    /// A job's run under a lease; see the [module documentation](self).
    pub(crate) struct LeasedRun<S, J, F, L> {
        #[pin]
        state: State<S, J, F, L>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, J, F, L> {
        Asking {
            gate: BoxFuture<'static, Gate<L>>,
            service: Option<S>,
            request: Option<JobRequest<J>>,
        },
        Running { #[pin] inner: F },
        Holding {
            #[pin]
            inner: F,
            #[pin]
            next_renewal: Sleep,
            renewal: Option<BoxFuture<'static, bool>>,
            lost: bool,
            lease: Option<L>,
        },
        Releasing {
            release: BoxFuture<'static, ()>,
            answer: Option<Result<Disposition, BoxError>>,
        },
    }
}

impl<S, J, F, L> LeasedRun<S, J, F, L> {
    /// A run that asks the store first (`gate`); `service` is ready.
    pub(crate) fn asking(
        gate: BoxFuture<'static, Gate<L>>,
        service: S,
        request: JobRequest<J>,
    ) -> Self {
        let (service, request) = (Some(service), Some(request));
        let state = State::Asking {
            gate,
            service,
            request,
        };
        LeasedRun { state }
    }

    /// A run that holds nothing and asks nothing.
    pub(crate) fn running(inner: F) -> Self {
        let state = State::Running { inner };
        LeasedRun { state }
    }
}

impl<S, J, F, L> fmt::Debug for LeasedRun<S, J, F, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Asking { .. } => "asking",
            State::Running { .. } => "running",
            State::Holding { .. } => "holding",
            State::Releasing { .. } => "releasing",
        };
        f.debug_struct("LeasedRun").field("state", &state).finish()
    }
}

fn polled_again<L: Lease>() -> BoxError {
    format!(
        "the {} layer's future was polled after it answered",
        L::LAYER
    )
    .into()
}

impl<S, J, F, L> Future for LeasedRun<S, J, F, L>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError, Future = F>,
    F: Future<Output = Result<Disposition, BoxError>>,
    L: Lease,
{
    type Output = Result<Disposition, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Asking {
                    gate,
                    service,
                    request,
                } => {
                    let gate = ready!(gate.as_mut().poll(cx));
                    let (Some(mut service), Some(request)) = (service.take(), request.take())
                    else {
                        return Poll::Ready(Err(polled_again::<L>()));
                    };
                    match gate {
                        Gate::Answer(disposition) => return Poll::Ready(Ok(disposition)),
                        Gate::Run => state.set(State::Running {
                            inner: service.call(request),
                        }),
                        Gate::Hold(lease) => state.set(State::Holding {
                            inner: service.call(request),
                            next_renewal: tokio::time::sleep(lease.renew_every()),
                            renewal: None,
                            lost: false,
                            lease: Some(lease),
                        }),
                    }
                }
                StateProj::Running { inner } => return inner.poll(cx),
                StateProj::Holding {
                    inner,
                    mut next_renewal,
                    renewal,
                    lost,
                    lease,
                } => {
                    if let Poll::Ready(answer) = inner.poll(cx) {
                        let Some(lease) = lease.take() else {
                            return Poll::Ready(Err(polled_again::<L>()));
                        };
                        let release = lease.release(&answer);
                        let answer = Some(answer);
                        state.set(State::Releasing { release, answer });
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
                    let Some(lease) = lease.as_ref() else {
                        return Poll::Pending;
                    };
                    next_renewal
                        .as_mut()
                        .reset(Instant::now() + lease.renew_every());
                    // A renewal still waiting for the store is left to
                    // finish; the next one starts a period later.
                    if renewal.is_none() {
                        *renewal = Some(lease.renew());
                    }
                }
                StateProj::Releasing { release, answer } => {
                    ready!(release.as_mut().poll(cx));
                    let answer = answer.take();
                    return Poll::Ready(answer.unwrap_or_else(|| Err(polled_again::<L>())));
                }
            }
        }
    }
}

/// A layer's public `ResponseFuture<S, J, F>`: its jobs' [`LeasedRun`]
/// holding `$lease`, documented by the doc comments given.
macro_rules! leased_response_future {
    ($(#[$doc:meta])* $lease:ty) => {
        pin_project_lite::pin_project! {
            $(#[$doc])*
            pub struct ResponseFuture<S, J, F> {
                #[pin]
                pub(super) run: $crate::leased::LeasedRun<S, J, F, $lease>,
            }
        }

        impl<S, J, F> std::fmt::Debug for ResponseFuture<S, J, F> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple("ResponseFuture").field(&self.run).finish()
            }
        }

        impl<S, J, F> std::future::Future for ResponseFuture<S, J, F>
        where
            S: tower_service::Service<
                    $crate::JobRequest<J>,
                    Response = queuey_core::Disposition,
                    Error = queuey_core::BoxError,
                    Future = F,
                >,
            F: std::future::Future<
                    Output = Result<queuey_core::Disposition, queuey_core::BoxError>,
                >,
        {
            type Output = Result<queuey_core::Disposition, queuey_core::BoxError>;

            fn poll(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Self::Output> {
                self.project().run.poll(cx)
            }
        }
    };
}

pub(crate) use leased_response_future;
