//! Giving back the keys of unique jobs once they are done for good.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::Uuid;
use queuey_core::store::Store;

/// The store a worker gives unique jobs' keys back to.
#[derive(Clone)]
pub(crate) struct UniqueKeys {
    store: Arc<dyn Store>,
    timeout: Duration,
}

impl UniqueKeys {
    pub(crate) fn new(store: Arc<dyn Store>, timeout: Duration) -> Self {
        UniqueKeys { store, timeout }
    }

    /// Gives `key` back if `job_id` holds it; a store that does not answer
    /// leaves it to expire with its window.
    pub(crate) async fn release(&self, key: &str, job_id: Uuid) {
        queuey_core::__private::release_unique(&*self.store, self.timeout, key, job_id).await;
    }
}

impl fmt::Debug for UniqueKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UniqueKeys")
            .field("store", &self.store)
            .field("timeout", &self.timeout)
            .finish()
    }
}
