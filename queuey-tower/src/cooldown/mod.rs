//! Cool-downs shared across jobs: after one job of a key is told to wait, the
//! others of that key wait too.
//!
//! An API that answers `429 Too Many Requests` with `Retry-After: 30` to one
//! job will answer the same to every other job that calls it in the next 30
//! seconds. [`CooldownLayer`] remembers that: the key of a job (its host,
//! tenant, API key — whatever a function of the job the application gives)
//! cools down for as long as the deferral the stack answered, and every job
//! of that key that arrives meanwhile is deferred for the time that remains
//! **without calling the handler**. Deferral spends no attempt and returns
//! ahead of the backlog, through the usual hold queues, so nothing is lost
//! and nothing runs early; jobs of other keys run as usual.
//!
//! The layer starts a cool-down from every wait it sees come back for a
//! keyed job: a [`Disposition::Defer`] (outside
//! [`DeferOn429`](struct@crate::defer::DeferOn429)), or an error the request's
//! [classifier](crate::classify) calls a `Retry-After` (inside it, where the
//! error passes on for the deferral layer to act on). A job deferred by a
//! [limit](crate::limit) inside the layer is the key's own limit at work,
//! not the API's answer, and starts no cool-down. A worker adds it for
//! one handler with
//! [`WorkerBuilder::handler_with`](crate::WorkerBuilder::handler_with),
//! inside the default stack; its key function reads that handler's job
//! type.
//!
//! The cool-downs live in the worker process and are shared by every clone
//! of the layer (one worker runs many jobs at once): another process
//! learns of a cool-down only from its own first 429. Keys whose cool-down
//! ran out are forgotten as new ones arrive, so memory follows the number
//! of keys cooling down at once. A job deferred by a cool-down counts as a
//! deferral, so [`DeferOn429::max_deferrals`](crate::defer::DeferOn429::max_deferrals)
//! counts it too.
//!
//! | metric | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_cooldown_keys` | gauge | `layer` | keys cooling down, as of the last cool-down started |
//! | `queuey_cooldown_deferred_total` | counter | `layer` | jobs deferred by a cool-down without calling the handler |
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use queuey_core::{BoxError, JobContext, JobError, Uuid};
//! use queuey_tower::cooldown::CooldownLayer;
//! use queuey_tower::defer::DeferOn429;
//! use queuey_core::Disposition;
//! use queuey_tower::JobRequest;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! struct CallApi {
//!     host: String,
//! }
//!
//! let stack = ServiceBuilder::new()
//!     .layer(CooldownLayer::new(|request: &JobRequest<CallApi>| {
//!         Some(request.job().host.clone())
//!     }))
//!     .layer(DeferOn429::new())
//!     .service(service_fn(|request: JobRequest<CallApi>| async move {
//!         if request.job().host == "slow.example" {
//!             Err::<Disposition, BoxError>(JobError::deferred(Duration::from_secs(30)).into_box_error())
//!         } else {
//!             Ok(Disposition::Ack)
//!         }
//!     }));
//!
//! let job = |host: &str| {
//!     JobRequest::new(CallApi { host: host.into() }, JobContext::new(Uuid::new_v4(), "q"))
//! };
//! // The first job of the host is told to wait 30 s ...
//! let first = stack.clone().oneshot(job("slow.example")).await.unwrap();
//! assert_eq!(first, Disposition::Defer { delay: Duration::from_secs(30) });
//! // ... so the next one waits too, without calling the API.
//! let second = stack.clone().oneshot(job("slow.example")).await.unwrap();
//! assert!(matches!(second, Disposition::Defer { delay } if delay <= Duration::from_secs(30)));
//! // Other hosts are not affected.
//! assert_eq!(stack.oneshot(job("fast.example")).await.unwrap(), Disposition::Ack);
//! # }
//! ```

pub mod future;
mod state;

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use queuey_core::BoxError;
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use queuey_core::Disposition;

use crate::JobRequest;
use state::Cooldowns;

/// Gauge of keys cooling down.
pub const COOLDOWN_KEYS: &str = "queuey_cooldown_keys";
/// Counter of jobs deferred by a cool-down without calling the handler.
pub const COOLDOWN_DEFERRED_TOTAL: &str = "queuey_cooldown_deferred_total";

/// Defers jobs whose key is cooling down; see the
/// [module documentation](self).
///
/// `F` maps a request to its key, or to `None` for a job that no cool-down
/// applies to. Clones share their cool-downs.
pub struct CooldownLayer<F, K> {
    key: Arc<F>,
    cooldowns: Arc<Cooldowns<K>>,
}

impl<F, K> CooldownLayer<F, K> {
    /// A layer keying jobs with `key`, its metrics labelled
    /// `layer = "cooldown"`.
    pub fn new<J>(key: F) -> Self
    where
        F: Fn(&JobRequest<J>) -> Option<K>,
        K: Hash + Eq,
    {
        Self::named("cooldown", key)
    }

    /// A layer keying jobs with `key`, its metrics labelled `layer = name`
    /// (to tell several cool-down layers of one process apart).
    pub fn named<J>(name: &'static str, key: F) -> Self
    where
        F: Fn(&JobRequest<J>) -> Option<K>,
        K: Hash + Eq,
    {
        CooldownLayer {
            key: Arc::new(key),
            cooldowns: Arc::new(Cooldowns::new(name)),
        }
    }
}

impl<F, K> Clone for CooldownLayer<F, K> {
    fn clone(&self) -> Self {
        CooldownLayer {
            key: Arc::clone(&self.key),
            cooldowns: Arc::clone(&self.cooldowns),
        }
    }
}

impl<F, K> fmt::Debug for CooldownLayer<F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CooldownLayer").finish_non_exhaustive()
    }
}

impl<S, F, K> Layer<S> for CooldownLayer<F, K> {
    type Service = Cooldown<S, F, K>;

    fn layer(&self, inner: S) -> Self::Service {
        Cooldown {
            inner,
            key: Arc::clone(&self.key),
            cooldowns: Arc::clone(&self.cooldowns),
        }
    }
}

/// The service [`CooldownLayer`] produces.
pub struct Cooldown<S, F, K> {
    inner: S,
    key: Arc<F>,
    cooldowns: Arc<Cooldowns<K>>,
}

impl<S, F, K> Cooldown<S, F, K> {
    crate::inner_accessors!();
}

impl<S: Clone, F, K> Clone for Cooldown<S, F, K> {
    fn clone(&self) -> Self {
        Cooldown {
            inner: self.inner.clone(),
            key: Arc::clone(&self.key),
            cooldowns: Arc::clone(&self.cooldowns),
        }
    }
}

impl<S: fmt::Debug, F, K> fmt::Debug for Cooldown<S, F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cooldown")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, F, K, J> Service<JobRequest<J>> for Cooldown<S, F, K>
where
    S: Service<JobRequest<J>, Response = Disposition, Error = BoxError>,
    F: Fn(&JobRequest<J>) -> Option<K>,
    K: Hash + Eq,
{
    crate::disposition_service!(future::ResponseFuture<S::Future, K>);

    fn call(&mut self, mut request: JobRequest<J>) -> Self::Future {
        let Some(key) = (self.key)(&request) else {
            return future::ResponseFuture::passed(self.inner.call(request));
        };
        let now = Instant::now();
        if let Some(delay) = self.cooldowns.remaining(&key, now) {
            metrics::counter!(COOLDOWN_DEFERRED_TOTAL, "layer" => self.cooldowns.name())
                .increment(1);
            tracing::debug!(
                queue = %request.ctx().queue(),
                job_id = %request.ctx().job_id(),
                ?delay,
                "the job's key is cooling down; deferred without running it"
            );
            return future::ResponseFuture::cooling(delay);
        }
        let classifier = request.classifier().clone();
        let limit_wait = Arc::new(AtomicBool::new(false));
        request.watch_limit_wait(Arc::clone(&limit_wait));
        future::ResponseFuture::keyed(
            self.inner.call(request),
            key,
            Arc::clone(&self.cooldowns),
            classifier,
            limit_wait,
        )
    }
}
