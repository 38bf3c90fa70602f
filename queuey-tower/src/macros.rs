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

pub(crate) use inner_accessors;
