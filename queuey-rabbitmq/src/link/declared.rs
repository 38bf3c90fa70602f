//! The queues declared through a backend.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use queuey_core::QueueConfig;

/// The queues declared through a backend, by name: replayed on every new
/// connection, and where holds and dead letters look up a queue's
/// configuration.
#[derive(Debug, Default)]
pub(super) struct Declared {
    queues: RwLock<HashMap<String, Arc<QueueConfig>>>,
}

impl Declared {
    /// The configuration of a declared queue.
    pub(super) fn get(&self, queue: &str) -> Option<Arc<QueueConfig>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(queue)
            .cloned()
    }

    /// How many queues were declared.
    pub(super) fn count(&self) -> usize {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Remembers a declared queue, replacing an earlier configuration.
    pub(super) fn remember(&self, config: &QueueConfig) {
        self.queues
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(config.name().to_owned(), Arc::new(config.clone()));
    }

    /// Every declared queue's configuration.
    pub(super) fn all(&self) -> Vec<QueueConfig> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|c| QueueConfig::clone(c))
            .collect()
    }
}
