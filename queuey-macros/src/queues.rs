//! `#[derive(Queues)]`: a fieldless enum becomes a set of queues.

mod names;

use proc_macro2::{Literal, Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields, Ident, Variant};

use crate::attr::{self, Millis, RetrySpec};
use crate::crate_path::core_path;

const SET_KEYS: &[&str] = &["prefix"];
const QUEUE_KEYS: &[&str] = &[
    "name",
    "prefetch",
    "durable",
    "message_ttl",
    "max_priority",
    "retry",
    "queue_type",
    "shards",
];

/// The most shards one queue may have, as `QueueConfig` checks it.
const MAX_SHARDS: u64 = 256;

/// The longest message TTL RabbitMQ accepts: ten years, as `QueueConfig`
/// checks it.
const MAX_TTL: Millis = Millis::from_millis(10 * 365 * 24 * 60 * 60 * 1000);

/// One variant, checked.
struct Queue {
    variant: Ident,
    full_name: String,
    /// Where errors about the name point: the `name` literal, else the variant.
    name_span: Span,
    /// A `QueueConfig` builder call per key given, in their order.
    calls: TokenStream,
}

pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let data = match &input.data {
        Data::Enum(data) => data,
        Data::Struct(s) => return Err(not_an_enum(s.struct_token.span)),
        Data::Union(u) => return Err(not_an_enum(u.union_token.span)),
    };
    if !input.generics.params.is_empty() || input.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "a queue set cannot be generic: its queue names are fixed at compile time; \
             remove the generic parameters",
        ));
    }
    if data.variants.is_empty() {
        return Err(syn::Error::new(
            input.ident.span(),
            format!(
                "the queue set `{}` has no queues: add one variant per queue, like \
                 `enum {} {{ Emails }}`",
                input.ident, input.ident
            ),
        ));
    }
    attr::refuse(
        &input.attrs,
        "queue",
        "`#[queue(..)]` goes on a variant, not on the enum; options of the whole set go in \
         `#[queues(prefix = \"..\")]`",
    )?;
    let prefix = prefix(&input)?;
    let core = core_path();

    let mut errors: Option<syn::Error> = None;
    let mut queues: Vec<Queue> = Vec::with_capacity(data.variants.len());
    for variant in &data.variants {
        let checked = queue(variant, prefix.as_deref(), &core).and_then(|queue| {
            match queues.iter().find(|q| q.full_name == queue.full_name) {
                Some(first) => Err(syn::Error::new(
                    queue.name_span,
                    format!(
                        "the queue name `{}` is already used by `{}::{}`; give this variant \
                         another `name`",
                        queue.full_name, input.ident, first.variant
                    ),
                )),
                None => Ok(queue),
            }
        });
        match checked {
            Ok(queue) => queues.push(queue),
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    if let Some(errors) = errors {
        return Err(errors);
    }
    Ok(generate(&core, &input.ident, &queues))
}

fn not_an_enum(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        "`#[derive(Queues)]` needs an enum with one fieldless variant per queue, like \
         `enum AppQueues { Emails, Webhooks }`",
    )
}

/// `#[queues(prefix = "..")]`, checked.
fn prefix(input: &DeriveInput) -> syn::Result<Option<String>> {
    let Some(list) = attr::collect(&input.attrs, "queues")? else {
        return Ok(None);
    };
    let mut prefix = None;
    for arg in &list.args {
        match arg.key.to_string().as_str() {
            "prefix" => prefix = Some(names::check_prefix(&arg.string("\"myapp\"")?)?),
            _ => return Err(arg.unknown("#[queues(..)]", SET_KEYS)),
        }
    }
    Ok(prefix)
}

/// One variant and its `#[queue(..)]`, checked.
fn queue(variant: &Variant, prefix: Option<&str>, core: &TokenStream) -> syn::Result<Queue> {
    if !matches!(variant.fields, Fields::Unit) {
        return Err(syn::Error::new_spanned(
            &variant.fields,
            format!(
                "a queue variant cannot carry data: write `{}` without fields (the job types \
                 carry the data)",
                variant.ident
            ),
        ));
    }
    attr::refuse(
        &variant.attrs,
        "queues",
        "`#[queues(..)]` goes on the enum, not on a variant; use `#[queue(..)]` here",
    )?;
    let mut queue = Queue {
        variant: variant.ident.clone(),
        full_name: String::new(),
        name_span: variant.ident.span(),
        calls: TokenStream::new(),
    };
    let calls = &mut queue.calls;
    let mut quorum = false;
    let mut refusals = Vec::new();
    let mut name = names::snake_case(&variant.ident.unraw().to_string());
    let list = attr::collect(&variant.attrs, "queue")?;
    for arg in list.iter().flat_map(|list| &list.args) {
        match arg.key.to_string().as_str() {
            "name" => {
                let lit = arg.string("\"emails\"")?;
                name = names::check_name(&lit)?;
                queue.name_span = lit.span();
            }
            "prefetch" => {
                let n = Literal::u64_unsuffixed(arg.int(1, u64::from(u16::MAX), 32)?);
                calls.extend(quote!(.prefetch(#n)));
            }
            "durable" => {
                let durable = arg.bool()?;
                if !durable {
                    refusals.push((
                        arg,
                        "a quorum queue is always durable; remove `durable = false` or use \
                         `queue_type = \"classic\"`",
                    ));
                }
                calls.extend(quote!(.durable(#durable)));
            }
            "message_ttl" => {
                let ttl = arg.duration()?;
                if ttl > MAX_TTL {
                    return Err(arg.error(format!(
                        "`message_ttl` must be at most 10 years (3650d), got {ttl}"
                    )));
                }
                let ms = Literal::u64_suffixed(ttl.get());
                calls.extend(quote!(.message_ttl(#core::__private::Duration::from_millis(#ms))));
            }
            "max_priority" => {
                let n = arg.int(0, u64::from(u8::MAX), 10)?;
                if n > 0 {
                    refusals.push((
                        arg,
                        "a quorum queue has no priority levels; remove `max_priority` (deferred \
                         jobs then return in FIFO order) or use `queue_type = \"classic\"`",
                    ));
                }
                let n = Literal::u64_unsuffixed(n);
                calls.extend(quote!(.max_priority(#n)));
            }
            "queue_type" => {
                let lit = arg.string("\"quorum\"")?;
                let queue_type = match lit.value().as_str() {
                    "quorum" => quote!(Quorum),
                    "classic" => quote!(Classic),
                    other => {
                        return Err(syn::Error::new(
                            lit.span(),
                            format!("unknown queue type `{other}`: use \"classic\" or \"quorum\""),
                        ));
                    }
                };
                quorum = lit.value() == "quorum";
                calls.extend(quote!(.queue_type(#core::QueueType::#queue_type)));
            }
            "retry" => {
                let policy = RetrySpec::parse(&arg.list()?)?.to_tokens(core);
                calls.extend(quote!(.retry(#policy)));
            }
            "shards" => {
                let n = Literal::u64_unsuffixed(arg.int(1, MAX_SHARDS, 4)?);
                calls.extend(quote!(.shards(#n)));
            }
            _ => return Err(arg.unknown("#[queue(..)]", QUEUE_KEYS)),
        }
    }
    if let (true, Some((arg, message))) = (quorum, refusals.first()) {
        return Err(arg.error(message));
    }
    queue.full_name = match prefix {
        Some(prefix) => format!("{prefix}.{name}"),
        None => name,
    };
    if queue.full_name.len() > names::MAX_NAME_BYTES {
        return Err(syn::Error::new(
            queue.name_span,
            format!(
                "the queue name is {} bytes long, prefix included, over AMQP's limit of {} \
                 bytes; choose a shorter `name`",
                queue.full_name.len(),
                names::MAX_NAME_BYTES
            ),
        ));
    }
    Ok(queue)
}

fn generate(core: &TokenStream, set: &Ident, queues: &[Queue]) -> TokenStream {
    let variants: Vec<&Ident> = queues.iter().map(|q| &q.variant).collect();
    let names: Vec<&str> = queues.iter().map(|q| q.full_name.as_str()).collect();
    let calls = queues.iter().map(|q| &q.calls);
    quote! {
        #[automatically_derived]
        impl #core::Queues for #set {
            const ALL: &'static [Self] = &[#(Self::#variants),*];

            fn name(&self) -> &'static str {
                match self {
                    #(Self::#variants => #names,)*
                }
            }

            fn config(&self) -> #core::QueueConfig {
                match self {
                    #(Self::#variants => #core::QueueConfig::new(#names) #calls,)*
                }
            }
        }
    }
}
