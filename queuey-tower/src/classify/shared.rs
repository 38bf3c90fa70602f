//! One classifier shared by every layer of a stack.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use super::{Classify, DefaultClassifier, FailureClass};

/// The classifier a [`JobRequest`](crate::JobRequest) carries: the
/// [`DefaultClassifier`] unless a worker or a
/// [`ClassifyLayer`](super::ClassifyLayer) set one of yours. Cloning it is
/// cheap (the default is free, yours is an `Arc`).
#[derive(Clone, Default)]
pub struct SharedClassifier {
    custom: Option<Arc<dyn Classify>>,
}

impl SharedClassifier {
    /// Shares `classifier`.
    pub fn new(classifier: impl Classify) -> Self {
        SharedClassifier {
            custom: Some(Arc::new(classifier)),
        }
    }

    /// Whether this is the [`DefaultClassifier`].
    pub fn is_default(&self) -> bool {
        self.custom.is_none()
    }
}

impl Classify for SharedClassifier {
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass {
        match &self.custom {
            Some(custom) => custom.classify(error),
            None => DefaultClassifier.classify(error),
        }
    }
}

impl fmt::Debug for SharedClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_default() {
            "SharedClassifier(default)"
        } else {
            "SharedClassifier(custom)"
        })
    }
}
