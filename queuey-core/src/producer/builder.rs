//! Building a [`Producer`] for a namespace.

use std::fmt;
use std::marker::PhantomData;

use std::sync::Arc;
use std::time::Duration;

use super::StoreHandle;
use super::pace::Pacer;
use crate::backend::Backend;
use crate::store::{DEFAULT_STORE_TIMEOUT, LimitStore, Store};
use crate::{Error, Namespace, Producer, Queues};

/// Builds a [`Producer`]; start with [`Producer::builder`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), queuey_core::Error> {
/// use std::sync::Arc;
/// use queuey_core::{Job, Namespace, Producer, Queues};
/// use queuey_core::memory::MemoryBackend;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// #[queues(prefix = "app")]
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
/// let backend = Arc::new(MemoryBackend::new());
/// let producer = Producer::<AppQueues, _>::builder(backend.clone())
///     .namespace(Namespace::new("tenant-42")?)
///     .build()
///     .await?;
/// producer.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
/// assert_eq!(producer.queue_name(&AppQueues::Emails), "tenant-42.app.emails");
/// assert_eq!(backend.ready_count("tenant-42.app.emails"), 1);
/// # Ok(())
/// # }
/// ```
pub struct ProducerBuilder<Q, B> {
    backend: B,
    namespace: Namespace,
    store: Option<Arc<dyn Store>>,
    limit_store: Option<Arc<dyn LimitStore>>,
    store_timeout: Duration,
    _queues: PhantomData<fn() -> Q>,
}

impl<Q: Queues, B: Backend> ProducerBuilder<Q, B> {
    pub(super) fn new(backend: B) -> Self {
        ProducerBuilder {
            backend,
            namespace: Namespace::root(),
            store: None,
            limit_store: None,
            store_timeout: DEFAULT_STORE_TIMEOUT,
            _queues: PhantomData,
        }
    }

    /// Enqueues onto the queues of `namespace` (`{namespace}.{queue}`)
    /// instead of the set's own names. Workers must use the same namespace
    /// to see these jobs.
    pub fn namespace(mut self, namespace: Namespace) -> Self {
        self.namespace = namespace;
        self
    }

    /// Checks unique jobs (see [`Unique`](crate::Unique)) in `store`: a
    /// [`MemoryStore`](crate::store::MemoryStore) for one process, a Redis
    /// store for a fleet. Workers need the same store to give keys back
    /// (else a key lasts its window). A store that fails or misses the
    /// [`store_timeout`](Self::store_timeout) does not stop the enqueue: the
    /// job goes unchecked, with a warning and a count in
    /// [`UNIQUE_UNCHECKED_TOTAL`](crate::store::UNIQUE_UNCHECKED_TOTAL).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// Books the turn of each job whose type declares a rate limit
    /// (`#[job(limit(key = .., rate = ".."))]`) in `store`, the limit store
    /// its workers keep limits in, and sends the job to arrive at its turn:
    /// a job of a busy key is then delivered once, when it may start,
    /// instead of being delivered, parked until its turn and delivered
    /// again. Jobs due at once only (not those given a delay or a `run_at`
    /// time, nor those a caller waits for, whose workers pace them as
    /// before). A store that fails or misses the
    /// [`store_timeout`](Self::store_timeout) does not stop the enqueue:
    /// the job goes at once, unbooked, with a warning and a count in
    /// [`UNBOOKED_TOTAL`](crate::store::limit::UNBOOKED_TOTAL).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), queuey_core::Error> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::store::MemoryStore;
    /// use queuey_core::{Job, Producer, Queues};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     Calls,
    /// }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Calls, limit(key = host, rate = "2/s"))]
    /// struct CallApi {
    ///     host: String,
    /// }
    ///
    /// let backend = Arc::new(MemoryBackend::new());
    /// let limits = MemoryStore::new(); // the workers' store too
    /// let producer = Producer::<AppQueues, _>::builder(backend.clone())
    ///     .limit_store(limits)
    ///     .build()
    ///     .await?;
    /// for _ in 0..3 {
    ///     producer.enqueue(&CallApi { host: "api.example".into() }).await?;
    /// }
    /// // The first may start now; the others wait for their turns, 0.5 s
    /// // and 1 s from now, held until then.
    /// assert_eq!(backend.ready_count("calls"), 1);
    /// assert_eq!(backend.held_count("calls"), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn limit_store(mut self, store: impl LimitStore) -> Self {
        self.limit_store = Some(Arc::new(store));
        self
    }

    /// How long one store call may take before the enqueue goes on without
    /// it (default [`DEFAULT_STORE_TIMEOUT`]).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Declares every queue of `Q` (in the namespace), then returns the
    /// producer; a refused name is an [`Error::InvalidConfig`] naming the
    /// namespace.
    pub async fn build(self) -> Result<Producer<Q, B>, Error> {
        self.backend
            .declare(&self.namespace.configs::<Q>())
            .await
            .map_err(|e| self.namespace.explain(e))?;
        Ok(self.build_undeclared())
    }

    /// The producer, declaring nothing (see [`Producer::new_undeclared`]).
    pub fn build_undeclared(self) -> Producer<Q, B> {
        let store = self.store.map(|store| StoreHandle {
            store,
            timeout: self.store_timeout,
        });
        let pacer = self
            .limit_store
            .map(|store| Pacer::new(store, self.store_timeout));
        Producer::from_parts(self.backend, self.namespace, store, pacer)
    }
}

impl<Q, B: fmt::Debug> fmt::Debug for ProducerBuilder<Q, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProducerBuilder")
            .field("queues", &std::any::type_name::<Q>())
            .field("namespace", &self.namespace)
            .field("backend", &self.backend)
            .field("store", &self.store)
            .field("limit_store", &self.limit_store)
            .finish()
    }
}
