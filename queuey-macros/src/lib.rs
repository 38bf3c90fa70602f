//! Derive macros for queuey: `#[derive(Queues)]` and `#[derive(Job)]`.
//!
//! Use them through the `queuey` facade (`use queuey::prelude::*;`) or
//! through `queuey-core`; the generated code finds whichever of the two the
//! crate depends on. Every setting is checked at compile time against the
//! rules the core's constructors and `QueueConfig::validate` enforce, so a
//! derived queue set or job never fails or panics at run time: a bad value is
//! a compile error pointing at it.
//!
//! Each derive's own page is its reference, with every key of its
//! attributes; the settings both share (retry blocks, durations) and the
//! errors follow them there and here.
//!
#![doc = include_str!("../docs/queues.md")]
#![doc = include_str!("../docs/job.md")]
#![doc = include_str!("../docs/settings.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod attr;
mod crate_path;
mod job;
mod queues;

use proc_macro::TokenStream;
use syn::DeriveInput;

/// Implements `Queues` for a fieldless enum: its reference follows.
///
#[doc = include_str!("../docs/queues.md")]
#[doc = include_str!("../docs/settings.md")]
#[proc_macro_derive(Queues, attributes(queues, queue))]
pub fn derive_queues(input: TokenStream) -> TokenStream {
    expand_with(input, queues::expand)
}

/// Implements `Job` for a struct or enum: its reference follows.
///
#[doc = include_str!("../docs/job.md")]
#[doc = include_str!("../docs/settings.md")]
#[proc_macro_derive(Job, attributes(job))]
pub fn derive_job(input: TokenStream) -> TokenStream {
    expand_with(input, job::expand)
}

/// Parses the item and runs a derive, turning its error into
/// `compile_error!`s at the spans it names.
fn expand_with(
    input: TokenStream,
    derive: fn(DeriveInput) -> syn::Result<proc_macro2::TokenStream>,
) -> TokenStream {
    match syn::parse::<DeriveInput>(input).and_then(derive) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
