//! One classifier shared by every layer of a stack.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use super::{Classify, FailureClass, class_of};

/// The classifier a [`JobRequest`](crate::JobRequest) carries: the
/// [`DefaultClassifier`](super::DefaultClassifier) unless a worker or a
/// [`ClassifyLayer`](crate::classify::ClassifyLayer) set yours (an `Arc`,
/// cheap to clone). Either classifies in queuey's one
/// [precedence](crate::classify#precedence).
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

    /// Whether this is the [`DefaultClassifier`](super::DefaultClassifier).
    pub fn is_default(&self) -> bool {
        self.custom.is_none()
    }
}

impl Classify for SharedClassifier {
    fn classify(&self, error: &(dyn StdError + 'static)) -> FailureClass {
        match &self.custom {
            Some(custom) => class_of(error, |error| Some(custom.classify(error))),
            None => class_of(error, |_| None),
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
