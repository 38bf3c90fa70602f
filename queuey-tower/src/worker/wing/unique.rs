//! Giving back the keys of unique jobs once they are done for good.
//!
//! A worker gives back only a key it computes again from the job it ran
//! (each handler's [`Job::unique`] for the payload), compared with the key
//! the message names: a message cannot make it remove a key it merely names.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::store::Store;
use queuey_core::{Disposition, Envelope, Job, Unique};
use serde_json::value::RawValue;

use super::{Ended, Extras, Settled, Starting, Wing, done_for_good};

/// What a job type declares about uniqueness for a payload: the decoded
/// job's [`Job::unique`], or `None` (not unique, or not this job type).
pub(crate) type Declared = fn(&RawValue) -> Option<Unique>;

/// The [`Declared`] of job type `J`.
pub(crate) fn declared<J: Job>(payload: &RawValue) -> Option<Unique> {
    serde_json::from_str::<J>(payload.get()).ok()?.unique()
}

/// The store a worker gives unique jobs' keys back to, and each handled
/// job type's way to compute them again.
#[derive(Clone)]
pub(crate) struct UniqueKeys {
    store: Arc<dyn Store>,
    timeout: Duration,
    /// By job type name: one entry per handler of that name (one per queue).
    declared: Arc<HashMap<&'static str, Vec<Declared>>>,
}

impl UniqueKeys {
    /// Keys given back to `store` within `timeout`, computed again by each
    /// handled job type's `(name, declared)` pair.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        timeout: Duration,
        handled: impl IntoIterator<Item = (&'static str, Declared)>,
    ) -> Self {
        let mut declared: HashMap<&'static str, Vec<Declared>> = HashMap::new();
        for (job_type, of) in handled {
            declared.entry(job_type).or_default().push(of);
        }
        UniqueKeys {
            store,
            timeout,
            declared: Arc::new(declared),
        }
    }

    /// Gives back the key `envelope` holds on `queue` (the logical queue)
    /// if it is the job's own and the job holds it; a store that does not
    /// answer leaves it to expire with its window.
    pub(crate) async fn release(&self, envelope: &Envelope, queue: &str) {
        let declared: Vec<Option<Unique>> = self
            .declared
            .get(envelope.job_type.as_str())
            .map(|all| all.iter().map(|of| of(&envelope.payload)).collect())
            .unwrap_or_default();
        queuey_core::__private::release_unique(
            &*self.store,
            self.timeout,
            envelope,
            queue,
            &declared,
        )
        .await;
    }
}

/// The unique wing: active when the worker was given a store.
pub(crate) struct UniqueWing {
    pub(super) keys: Option<UniqueKeys>,
}

impl Wing for UniqueWing {
    /// A unique job done for good, whose key to give back once it is
    /// settled (boxed: only a unique job carries one).
    type Job = Option<Box<Envelope>>;

    fn start(&self, _job: &Starting<'_>, _extras: &mut Extras) -> Self::Job {
        None
    }

    fn run_ended(
        &self,
        done: &mut Self::Job,
        disposition: Disposition,
        job: &mut Ended<'_>,
    ) -> Disposition {
        // Only a unique job carries a key; every other job skips this. The
        // key is computed again from the job before it is given back.
        if self.keys.is_some() && job.envelope().unique_key.is_some() && done_for_good(&disposition)
        {
            *done = Some(Box::new(job.envelope().clone()));
        }
        disposition
    }

    async fn settled(&self, done: Self::Job, job: &Settled<'_>) {
        if let (Some(keys), Some(envelope)) = (&self.keys, done) {
            Box::pin(keys.release(&envelope, job.queue)).await;
        }
    }
}

impl fmt::Debug for UniqueKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UniqueKeys")
            .field("store", &self.store)
            .field("timeout", &self.timeout)
            .field("job_types", &self.declared.len())
            .finish()
    }
}
