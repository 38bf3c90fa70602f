//! Helpers shared by the layers.

/// `get_ref`, `get_mut` and `into_inner` for a service wrapping `inner: S`,
/// documented the same way everywhere.
macro_rules! inner_accessors {
    () => {
        /// The wrapped service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The wrapped service, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Unwraps the service.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}

/// A layer without settings (`new`, `Default`, `Copy`) and the service it
/// wraps around `inner` (with the [`inner_accessors`]), each documented as
/// given. The service's other fields start as their `Default`.
macro_rules! plain_layer {
    (
        $(#[$layer_doc:meta])*
        pub struct $layer:ident;

        $(#[$service_doc:meta])*
        pub struct $service:ident<S> { $($(#[$field_doc:meta])* $field:ident: $ty:ty),* $(,)? }
    ) => {
        $(#[$layer_doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $layer {
            _priv: (),
        }

        impl $layer {
            /// A new layer.
            pub const fn new() -> Self {
                $layer { _priv: () }
            }
        }

        impl<S> tower_layer::Layer<S> for $layer {
            type Service = $service<S>;

            fn layer(&self, inner: S) -> Self::Service {
                $service {
                    inner,
                    $($field: <$ty>::default(),)*
                }
            }
        }

        $(#[$service_doc])*
        #[derive(Debug, Clone)]
        pub struct $service<S> {
            inner: S,
            $($(#[$field_doc])* $field: $ty,)*
        }

        impl<S> $service<S> {
            $crate::inner_accessors!();
        }
    };
}

/// In a layer's `Service<JobRequest<J>>` impl: it answers a `Disposition`
/// or a `BoxError` through `$future`, and is ready when `inner` is.
macro_rules! disposition_service {
    ($future:ty) => {
        type Response = queuey_core::Disposition;
        type Error = queuey_core::BoxError;
        type Future = $future;

        fn poll_ready(
            &mut self,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            self.inner.poll_ready(cx)
        }
    };
}

/// A layer's `Future for ResponseFuture<F>`, `F` answering a disposition or
/// an error as the layer does: `poll` runs the body with `$this` the pinned
/// projection of the future and `$cx` the task's context.
macro_rules! disposition_future {
    (|$this:ident, $cx:ident| $body:block) => {
        impl<F> std::future::Future for ResponseFuture<F>
        where
            F: std::future::Future<
                    Output = Result<queuey_core::Disposition, queuey_core::BoxError>,
                >,
        {
            type Output = Result<queuey_core::Disposition, queuey_core::BoxError>;

            fn poll(
                self: std::pin::Pin<&mut Self>,
                $cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Self::Output> {
                let $this = self.project();
                $body
            }
        }
    };
}

pub(crate) use {disposition_future, disposition_service, inner_accessors, plain_layer};
