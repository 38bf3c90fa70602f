//! Setting the classifier of a stack with a layer.

use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::{Classify, SharedClassifier};
use crate::JobRequest;

/// Sets the classifier every layer inside it reads; see the
/// [module documentation](super).
///
/// A worker already sets its own
/// ([`WorkerBuilder::classifier`](crate::WorkerBuilder::classifier)); this
/// layer is for a stack run on its own, or one job type's stack that
/// classifies differently from the rest of its worker.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queuey_core::{BoxError, JobContext, Uuid};
/// use queuey_tower::classify::{ClassifyLayer, FailureClass};
/// use queuey_tower::dead_letter::DeadLetterLayer;
/// use queuey_core::Disposition;
/// use queuey_tower::JobRequest;
/// use queuey_tower::retry::RetryLayer;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// let everything_is_fatal = |_: &(dyn std::error::Error + 'static)| Some(FailureClass::Fatal);
/// let stack = ServiceBuilder::new()
///     .layer(ClassifyLayer::new(everything_is_fatal))
///     .layer(DeadLetterLayer::new())
///     .layer(RetryLayer)
///     .service(service_fn(|_: JobRequest<()>| async {
///         Err::<Disposition, BoxError>("connection reset".into())
///     }));
/// let request = JobRequest::new((), JobContext::new(Uuid::new_v4(), "q"));
/// assert_eq!(
///     stack.oneshot(request).await.unwrap(),
///     Disposition::DeadLetter { reason: "fatal: connection reset".into() }
/// );
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ClassifyLayer {
    classifier: SharedClassifier,
}

impl ClassifyLayer {
    /// A layer setting `classifier`.
    pub fn new(classifier: impl Classify) -> Self {
        ClassifyLayer {
            classifier: SharedClassifier::new(classifier),
        }
    }
}

impl<S> Layer<S> for ClassifyLayer {
    type Service = Classifying<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Classifying {
            inner,
            classifier: self.classifier.clone(),
        }
    }
}

/// The service [`ClassifyLayer`] produces.
#[derive(Debug, Clone)]
pub struct Classifying<S> {
    inner: S,
    classifier: SharedClassifier,
}

impl<S> Classifying<S> {
    crate::inner_accessors!();
}

impl<S, J> Service<JobRequest<J>> for Classifying<S>
where
    S: Service<JobRequest<J>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: JobRequest<J>) -> Self::Future {
        request.set_classifier(self.classifier.clone());
        self.inner.call(request)
    }
}
