//! Derive macros for queuey (placeholder until the derives land).
use proc_macro::TokenStream;

/// Derives `Queues`.
#[proc_macro_derive(Queues, attributes(queues, queue))]
pub fn derive_queues(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}

/// Derives `Job`.
#[proc_macro_derive(Job, attributes(job))]
pub fn derive_job(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
