//! The service [`IdempotencyLayer`](super::IdempotencyLayer) produces.

use std::fmt;
use std::sync::Arc;

use futures::future::FutureExt;
use queuey_core::{BoxError, Disposition};
use tower_service::Service;

use super::claim::{Delivery, Shared};
use super::future::ResponseFuture;
use crate::JobRequest;
use crate::leased::LeasedRun;

/// Runs each job once per id; see the [module documentation](super).
///
/// The inner service is called after the store answered, so each call takes
/// the ready service and leaves a clone (`S: Clone`) in its place.
pub struct Idempotency<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Idempotency<S> {
    pub(super) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Idempotency { inner, shared }
    }

    crate::inner_accessors!();
}

impl<S: Clone> Clone for Idempotency<S> {
    fn clone(&self) -> Self {
        Idempotency {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Idempotency<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .field("store", &self.shared.store)
            .field("window", &self.shared.window)
            .field("lease", &self.shared.lease)
            .field("store_timeout", &self.shared.store_timeout)
            .finish()
    }
}

impl<S, J> Service<JobRequest<J>> for Idempotency<S>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError> + Clone,
{
    crate::disposition_service!(ResponseFuture<S, J, S::Future>);

    fn call(&mut self, request: JobRequest<J>) -> Self::Future {
        // The ready service goes with the request; its clone waits for the
        // next `poll_ready`.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        let check = Arc::clone(&self.shared)
            .check(Delivery::new(request.ctx()))
            .boxed();
        let run = LeasedRun::asking(check, ready, request);
        ResponseFuture { run }
    }
}
