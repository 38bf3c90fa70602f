//! The service [`LimitLayer`](super::LimitLayer) produces.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::FutureExt;
use queuey_core::{BoxError, Disposition};
use tower_service::Service;

use super::admit::{Holder, Shared};
use super::future::ResponseFuture;
use crate::JobRequest;
use crate::leased::LeasedRun;

/// Limits the jobs of each key; see the [module documentation](super).
///
/// A keyed job calls the inner service only after the store answered, so
/// each call takes the service made ready by `poll_ready` and leaves a
/// clone in its place (`S: Clone`, as every service of a worker's stack
/// is).
pub struct Limit<S, F> {
    inner: S,
    key: Arc<F>,
    shared: Arc<Shared>,
}

impl<S, F> Limit<S, F> {
    pub(super) fn new(inner: S, key: Arc<F>, shared: Arc<Shared>) -> Self {
        Limit { inner, key, shared }
    }

    crate::inner_accessors!();
}

impl<S: Clone, F> Clone for Limit<S, F> {
    fn clone(&self) -> Self {
        Limit {
            inner: self.inner.clone(),
            key: Arc::clone(&self.key),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, F> fmt::Debug for Limit<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("inner", &self.inner)
            .field("name", &self.shared.name)
            .field("concurrency", &self.shared.concurrency)
            .field("rate", &self.shared.rate)
            .finish_non_exhaustive()
    }
}

impl<S, F, J> Service<JobRequest<J>> for Limit<S, F>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError> + Clone,
    F: Fn(&JobRequest<J>) -> Option<String>,
{
    type Response = Disposition;
    type Error = BoxError;
    type Future = ResponseFuture<S, J, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: JobRequest<J>) -> Self::Future {
        let limited = self.shared.concurrency.is_some() || self.shared.rate.is_some();
        let key = if limited { (self.key)(&request) } else { None };
        let Some(key) = key else {
            let run = LeasedRun::running(self.inner.call(request));
            return ResponseFuture { run };
        };
        // The ready service goes with the request; its clone waits for the
        // next `poll_ready`.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        let job = Holder::new(&self.shared.name, &key, &request);
        let admit = Arc::clone(&self.shared).admit(job).boxed();
        let run = LeasedRun::asking(admit, ready, request);
        ResponseFuture { run }
    }
}
