//! [`LimitLayer`]: the limits of a key and where they are kept.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::store::{DEFAULT_STORE_TIMEOUT, LimitStore, Rate};
use queuey_core::{Job, Limits};
use tower::util::Either;
use tower_layer::Layer;

use super::admit::Shared;
use super::error::ZeroConcurrency;
use super::pace::Pace;
use super::service::Limit;
use super::{DEFAULT_LEASE, DEFAULT_STORE_PAUSE, MIN_LEASE, OnStoreError, WARN_EVERY};
use crate::JobRequest;
use queuey_core::__private::Throttle;

/// Limits how many jobs of a key run at once and how many start per
/// period, across every worker sharing the store; see the
/// [module documentation](super).
///
/// `F` maps a request to its key, or to `None` for a job no limit applies
/// to. A layer with neither [`concurrency`](Self::concurrency) nor
/// [`rate`](Self::rate) lets every job through. Clones share their
/// settings and their store.
pub struct LimitLayer<F> {
    key: Arc<F>,
    shared: Arc<Shared>,
}

impl<F> LimitLayer<F> {
    /// A layer named `name` keeping its limits in `store` (any
    /// [`LimitStore`]; an `Arc<dyn LimitStore>` shared with other layers is
    /// one too), keying jobs with `key`. It limits nothing until given
    /// [`concurrency`](Self::concurrency) or [`rate`](Self::rate).
    ///
    /// The name labels the layer's metrics and prefixes its keys in the
    /// store (`limit:{name}:{key}`): layers of different processes with the
    /// same name and store share their limits, layers with different names
    /// do not. Keep it to a fixed word (the job type, the API called).
    pub fn new<J, S>(name: impl Into<Arc<str>>, store: S, key: F) -> Self
    where
        F: Fn(&JobRequest<J>) -> Option<String>,
        S: LimitStore,
    {
        LimitLayer {
            key: Arc::new(key),
            shared: Arc::new(Shared {
                name: name.into(),
                store: Arc::new(store),
                concurrency: None,
                rate: None,
                lease: DEFAULT_LEASE,
                store_timeout: DEFAULT_STORE_TIMEOUT,
                on_store_error: OnStoreError::default(),
                store_pause: DEFAULT_STORE_PAUSE,
                pace: Pace::new(),
                warnings: Arc::new(Throttle::new(WARN_EVERY)),
            }),
        }
    }

    fn set(mut self, f: impl FnOnce(&mut Shared)) -> Self {
        f(Arc::make_mut(&mut self.shared));
        self
    }

    /// Sets the limits `limits` gives (a job type's
    /// [`Job::limits`](queuey_core::Job::limits)); a limit it leaves out is
    /// left as it was.
    pub fn limits(self, limits: Limits) -> Self {
        self.set(|shared| {
            if let Some(limit) = limits.concurrency() {
                shared.concurrency = Some(limit.get());
            }
            if let Some(rate) = limits.rate() {
                shared.rate = Some(rate);
            }
            if limits.fails_open() {
                shared.on_store_error = OnStoreError::FailOpen;
            }
        })
    }

    /// At most `limit` jobs of a key run at once. Refused for 0, which
    /// would let none run.
    pub fn concurrency(self, limit: u32) -> Result<Self, ZeroConcurrency> {
        if limit == 0 {
            return Err(ZeroConcurrency::new());
        }
        Ok(self.set(|shared| shared.concurrency = Some(limit)))
    }

    /// At most `rate` jobs of a key start per period, in bursts of at most
    /// its burst.
    pub fn rate(self, rate: Rate) -> Self {
        self.set(|shared| shared.rate = Some(rate))
    }

    /// How long a running job's slot holds without renewal
    /// ([`DEFAULT_LEASE`], 30 s, by default, at least [`MIN_LEASE`]). The
    /// slot is renewed every third of the lease while the job runs, so the
    /// lease bounds only how long the slot of a worker that died stays
    /// taken.
    pub fn lease(self, lease: Duration) -> Self {
        self.set(|shared| shared.lease = lease.max(MIN_LEASE))
    }

    /// How long one store call may take before it counts as a store error
    /// ([`DEFAULT_STORE_TIMEOUT`] by default).
    pub fn store_timeout(self, timeout: Duration) -> Self {
        self.set(|shared| shared.store_timeout = timeout)
    }

    /// What a job does when the store fails
    /// ([`OnStoreError::FailClosed`] by default).
    pub fn on_store_error(self, on_error: OnStoreError) -> Self {
        self.set(|shared| shared.on_store_error = on_error)
    }

    /// How long a job waits, about (between half and one and a half times
    /// it, at least 1 ms), when the store failed and the layer fails closed
    /// ([`DEFAULT_STORE_PAUSE`], 5 s, by default).
    pub fn store_pause(self, pause: Duration) -> Self {
        self.set(|shared| shared.store_pause = pause)
    }

    /// How long a job waits for a running slot (see [`Pace`]).
    pub fn pace(self, pace: Pace) -> Self {
        self.set(|shared| shared.pace = pace)
    }

    /// The layer's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// How many jobs of a key run at once, at most, if limited.
    pub fn get_concurrency(&self) -> Option<u32> {
        self.shared.concurrency
    }

    /// How many jobs of a key start per period, at most, if limited.
    pub fn get_rate(&self) -> Option<Rate> {
        self.shared.rate
    }
}

/// The key function of [`for_job`].
pub type JobKey<J> = fn(&JobRequest<J>) -> Option<String>;

/// The layer job type `J` declares with `#[job(limit(..))]`: named
/// after the job type ([`Job::NAME`]), keyed by [`Job::limit_key`],
/// with [`Job::limits`] (none: it limits nothing), its limits kept in
/// `store`.
///
/// ```
/// use queuey_core::store::MemoryStore;
/// use queuey_core::{Job, Queues};
/// use queuey_tower::limit;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Calls,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Calls, limit(key = host, concurrency = 3, rate = "10/s"))]
/// struct CallApi {
///     host: String,
/// }
///
/// let layer = limit::for_job::<CallApi>(MemoryStore::new());
/// assert_eq!(layer.name(), "CallApi");
/// assert_eq!(layer.get_concurrency(), Some(3));
/// ```
pub fn for_job<J: Job>(store: impl LimitStore) -> LimitLayer<JobKey<J>> {
    let key: JobKey<J> = |request| request.job().limit_key();
    let layer = LimitLayer::new(J::NAME, store, key);
    match J::limits() {
        Some(limits) => layer.limits(limits),
        None => layer,
    }
}

/// A handler's service with the limits its job type declares, when the
/// worker keeps limits; the service alone otherwise.
pub(crate) type Declared<J, S> = Either<Limit<S, JobKey<J>>, S>;

/// What a worker runs a handler of `J` in: inside the limits `J` declares
/// when the worker was given a limit store, as is otherwise.
pub(crate) fn declared<J: Job, S>(store: Option<&Arc<dyn LimitStore>>, inner: S) -> Declared<J, S> {
    match (J::limits(), store) {
        (Some(limits), Some(store)) if !limits.is_empty() => {
            Either::Left(for_job::<J>(Arc::clone(store)).layer(inner))
        }
        _ => Either::Right(inner),
    }
}

impl<F> Clone for LimitLayer<F> {
    fn clone(&self) -> Self {
        LimitLayer {
            key: Arc::clone(&self.key),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<F> fmt::Debug for LimitLayer<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitLayer")
            .field("name", &self.shared.name)
            .field("concurrency", &self.shared.concurrency)
            .field("rate", &self.shared.rate)
            .field("lease", &self.shared.lease)
            .field("on_store_error", &self.shared.on_store_error)
            .finish_non_exhaustive()
    }
}

impl<S, F> Layer<S> for LimitLayer<F> {
    type Service = Limit<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        Limit::new(inner, Arc::clone(&self.key), Arc::clone(&self.shared))
    }
}
