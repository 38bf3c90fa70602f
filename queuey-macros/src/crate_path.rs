//! Where the generated code finds queuey's traits.
//!
//! Users depend either on the `queuey` facade or directly on `queuey-core`,
//! possibly under another name. The facade re-exports the core as
//! `__core`, so both cases come down to one path to the core crate.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;
use syn::ext::IdentExt;
use syn::parse::Parser;

/// The path to `queuey_core` as the crate being compiled can name it.
///
/// The facade wins when both are dependencies. Inside the facade and inside
/// the core themselves, `extern crate self as ..` makes the absolute paths
/// resolve. If the manifest cannot be read or names neither crate, the
/// facade path is used, so the compiler's own "unresolved crate `queuey`"
/// error tells the user which dependency to add.
pub(crate) fn core_path() -> TokenStream {
    let fallback = quote!(::queuey::__core);
    if let Ok(found) = crate_name("queuey") {
        return match found {
            FoundCrate::Itself => fallback,
            FoundCrate::Name(name) => match ident(&name) {
                Some(facade) => quote!(::#facade::__core),
                None => fallback,
            },
        };
    }
    match crate_name("queuey-core") {
        Ok(FoundCrate::Itself) => quote!(::queuey_core),
        Ok(FoundCrate::Name(name)) => match ident(&name) {
            Some(core) => quote!(::#core),
            None => fallback,
        },
        Err(_) => fallback,
    }
}

/// The crate name as an identifier; `None` (rather than a panic) if the
/// manifest holds something that is not one.
fn ident(name: &str) -> Option<Ident> {
    Ident::parse_any.parse_str(name).ok()
}
