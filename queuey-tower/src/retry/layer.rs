use std::sync::Arc;

use queuey_core::RetryPolicy;
use tower_layer::Layer;

use super::Retry;
use crate::classify::{Classify, DefaultClassifier};

/// Turns transient failures into retries; see the [module documentation](super).
#[derive(Debug, Clone)]
pub struct RetryLayer<C = DefaultClassifier> {
    policy: Arc<RetryPolicy>,
    classifier: C,
}

impl RetryLayer {
    /// A retry layer whose own policy (used when neither the job type nor
    /// its queue sets one) is `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        RetryLayer {
            policy: Arc::new(policy),
            classifier: DefaultClassifier,
        }
    }
}

impl Default for RetryLayer {
    /// [`RetryPolicy::default`]: five attempts, exponential backoff from 1 s
    /// to 5 minutes with full jitter.
    fn default() -> Self {
        RetryLayer::new(RetryPolicy::default())
    }
}

impl<C> RetryLayer<C> {
    /// Uses `classifier` to decide which errors are transient.
    pub fn classifier<C2: Classify>(self, classifier: C2) -> RetryLayer<C2> {
        RetryLayer {
            policy: self.policy,
            classifier,
        }
    }

    /// The layer's own policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

impl<S, C: Clone> Layer<S> for RetryLayer<C> {
    type Service = Retry<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry::new(inner, Arc::clone(&self.policy), self.classifier.clone())
    }
}
