//! The response future of [`DeadLetter`](super::DeadLetter).

use std::task::{Poll, ready};

use pin_project_lite::pin_project;

use crate::classifier::{Classify, SharedClassifier, last_resort};

pin_project! {
    /// The response future of [`DeadLetter`](super::DeadLetter).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        pub(super) inner: F,
        pub(super) classifier: SharedClassifier,
    }
}

crate::disposition_future!(|this, cx| {
    Poll::Ready(Ok(match ready!(this.inner.poll(cx)) {
        Ok(disposition) => disposition,
        Err(error) => last_resort(this.classifier.classify(&*error), &*error),
    }))
});
