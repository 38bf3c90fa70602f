//! The queues declared through a backend.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use queuey_core::QueueConfig;

/// The queues declared through a backend, by name: replayed on every new
/// connection, and where holds and dead letters look up a queue's
/// configuration.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    queues: RwLock<HashMap<String, Arc<QueueConfig>>>,
}

impl Declared {
    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Arc<QueueConfig>>> {
        self.queues.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The configuration of a declared queue.
    pub(crate) fn get(&self, queue: &str) -> Option<Arc<QueueConfig>> {
        self.read().get(queue).cloned()
    }

    /// How many queues were declared.
    pub(crate) fn count(&self) -> usize {
        self.read().len()
    }

    /// Remembers a declared queue, replacing an earlier configuration.
    pub(crate) fn remember(&self, config: &QueueConfig) {
        let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
        queues.insert(config.name().to_owned(), Arc::new(config.clone()));
    }

    /// Every declared queue's configuration.
    pub(crate) fn all(&self) -> Vec<QueueConfig> {
        self.read()
            .values()
            .map(|c| QueueConfig::clone(c))
            .collect()
    }
}
