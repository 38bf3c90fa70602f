use std::sync::Arc;

use queuey_core::RetryPolicy;
use tower_layer::Layer;

use super::Retry;

/// Turns transient failures into retries; see the [module documentation](super).
///
/// `RetryLayer` is also a value: the layer with no policy of its own, which
/// uses the job type's or queue's policy, else [`RetryPolicy::default`].
/// [`RetryLayer::new`] sets the fallback policy.
///
/// ```
/// use queuey_tower::defer::DeferOn429;
/// use queuey_tower::retry::RetryLayer;
/// use tower::ServiceBuilder;
///
/// let layers = ServiceBuilder::new().layer(RetryLayer).layer(DeferOn429);
/// # let _ = layers;
/// ```
#[derive(Debug, Clone, Default)]
pub struct RetryLayer {
    policy: Option<Arc<RetryPolicy>>,
}

/// The retry layer with its defaults: the job's own policy, else
/// [`RetryPolicy::default`]. Same as [`RetryLayer::default()`].
#[allow(non_upper_case_globals)]
pub const RetryLayer: RetryLayer = RetryLayer { policy: None };

impl RetryLayer {
    /// A retry layer whose own policy (used when neither the job type nor
    /// its queue sets one) is `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        RetryLayer {
            policy: Some(Arc::new(policy)),
        }
    }

    /// The layer's own policy, if it has one; without, a job with no
    /// policy of its own gets [`RetryPolicy::default`].
    pub fn policy(&self) -> Option<&RetryPolicy> {
        self.policy.as_deref()
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Self::Service {
        let policy = self
            .policy
            .clone()
            .unwrap_or_else(|| Arc::new(RetryPolicy::default()));
        Retry::new(inner, policy)
    }
}
