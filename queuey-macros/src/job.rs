//! `#[derive(Job)]`: binds a job type to one queue of one queue set.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::{Data, DeriveInput, Fields, LitStr, Path, PathArguments};

use crate::attr::{self, LimitSpec, Millis, RetrySpec};
use crate::crate_path::core_path;

const KEYS: &[&str] = &[
    "queue", "name", "retry", "output", "unique", "key", "tenant", "deadline", "limit",
];

/// The keys of `unique(..)`.
const UNIQUE_KEYS: &[&str] = &["window", "key"];

/// What `#[job(..)]` says, checked.
struct JobSpec {
    /// `AppQueues::Emails`, as written (so type errors point at it).
    queue: Path,
    /// `AppQueues`: the queue path minus its last segment.
    set: Path,
    name: String,
    retry: Option<RetrySpec>,
    /// The handler's output type, as written; `()` when left out.
    output: Option<syn::Type>,
    unique: Option<UniqueSpec>,
    /// `key = field` or `key = Self::method`.
    key: Option<Path>,
    /// `tenant = field` or `tenant = Self::method`.
    tenant: Option<Path>,
    /// `deadline = "30m"`: the type's default deadline.
    deadline: Option<Millis>,
    /// `limit(key = Self::host, concurrency = 3, rate = "10/s")`.
    limit: Option<LimitSpec>,
}

/// `unique(window = "10m", key = Self::tenant)`.
struct UniqueSpec {
    window: Millis,
    /// Where `window` was written, for the compile-time check's error.
    window_span: proc_macro2::Span,
    /// A function of `&Self` whose value (anything `Display`) is the key;
    /// the whole job when absent.
    key: Option<Path>,
}

pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    if let Data::Union(u) = &input.data {
        return Err(syn::Error::new(
            u.union_token.span,
            "`#[derive(Job)]` works on structs and enums, not unions (a job must be \
             serializable)",
        ));
    }
    if !input.generics.params.is_empty() || input.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "a job type cannot be generic: every job type needs its own name, which picks \
             its handler; define one concrete type per job, e.g. `struct SendEmail(Message<Email>);`",
        ));
    }
    refuse_inner_attributes(&input.data)?;
    let spec = parse(&input)?;

    let core = core_path();
    let ident = &input.ident;
    let JobSpec {
        queue,
        set,
        name,
        output,
        ..
    } = &spec;
    let output = match output {
        Some(ty) => quote!(#ty),
        None => quote!(()),
    };
    let retry = spec.retry.as_ref().map(|retry| {
        let policy = retry.to_tokens(&core);
        quote! {
            fn retry_policy() -> ::core::option::Option<#core::RetryPolicy> {
                ::core::option::Option::Some(#policy)
            }
        }
    });
    let unique = spec.unique.as_ref().map(|unique| {
        let ms = unique.window.get();
        let window = quote!(#core::__private::Duration::from_millis(#ms));
        // The window goes through the one check every window takes
        // (`queuey_core::store::check_window`), run by the compiler.
        let checked = quote_spanned! {unique.window_span=>
            const _: () = match #core::store::check_window(#window) {
                ::core::result::Result::Ok(_) => (),
                ::core::result::Result::Err(error) => ::core::panic!("{}", error.as_static_str()),
            };
        };
        let made = match &unique.key {
            Some(key) => quote! {
                #core::Unique::key(::std::string::ToString::to_string(&#key(self)), #window)
            },
            None => quote!(#core::Unique::payload(#window)),
        };
        quote! {
            fn unique(&self) -> ::core::option::Option<#core::Unique> {
                #checked
                ::core::option::Option::Some(#made)
            }
        }
    });
    let key = spec.key.as_ref().map(|key| text_method(quote!(key), key));
    let tenant = spec
        .tenant
        .as_ref()
        .map(|tenant| text_method(quote!(tenant), tenant));
    let deadline = spec.deadline.map(|budget| {
        let ms = budget.get();
        quote! {
            fn deadline() -> ::core::option::Option<#core::__private::Duration> {
                ::core::option::Option::Some(#core::__private::Duration::from_millis(#ms))
            }
        }
    });
    let limit = spec.limit.as_ref().map(|limit| limit.to_tokens(&core));
    Ok(quote! {
        #[automatically_derived]
        impl #core::Job for #ident {
            type Queues = #set;
            type Output = #output;
            const QUEUE: Self::Queues = #queue;
            const NAME: &'static str = #name;
            #retry
            #unique
            #key
            #tenant
            #deadline
            #limit
        }
    })
}

fn parse(input: &DeriveInput) -> syn::Result<JobSpec> {
    let ident = &input.ident;
    let missing_queue = || {
        syn::Error::new(
            ident.span(),
            format!(
                "`#[derive(Job)]` needs the job's queue: add `#[job(queue = AppQueues::Emails)]` \
                 above `{ident}`, naming a variant of a `#[derive(Queues)]` enum"
            ),
        )
    };
    let Some(list) = attr::collect(&input.attrs, "job")? else {
        return Err(missing_queue());
    };
    let mut queue = None;
    let mut name = None;
    let mut retry = None;
    let mut unique = None;
    let mut output = None;
    let mut key = None;
    let mut tenant = None;
    let mut deadline = None;
    let mut limit = None;
    for arg in &list.args {
        match arg.key.to_string().as_str() {
            "queue" => queue = Some(queue_path(arg)?),
            "name" => name = Some(job_name(&arg.string("\"send_email\"")?)?),
            "retry" => retry = Some(RetrySpec::parse(&arg.list()?)?),
            "unique" => unique = Some(unique_spec(arg)?),
            "output" => output = Some(arg.ty()?.clone()),
            "key" => key = Some(arg.path("customer_id")?.clone()),
            "tenant" => tenant = Some(arg.path("customer")?.clone()),
            "deadline" => deadline = Some(arg.duration()?),
            "limit" => limit = Some(LimitSpec::parse(arg, &arg.list()?)?),
            _ => return Err(arg.unknown("#[job(..)]", KEYS)),
        }
    }
    let Some((queue, set)) = queue else {
        return Err(missing_queue());
    };
    Ok(JobSpec {
        queue,
        set,
        name: name.unwrap_or_else(|| ident.unraw().to_string()),
        retry,
        unique,
        output,
        key,
        tenant,
        deadline,
        limit,
    })
}

/// `fn name(&self) -> Option<String>` giving `path`'s value as text: a
/// lone name is a field, a path a function of `&Self`.
fn text_method(name: TokenStream, path: &Path) -> TokenStream {
    let value = match path.get_ident() {
        Some(field) => quote!(&self.#field),
        None => quote!(&#path(self)),
    };
    quote! {
        fn #name(&self) -> ::core::option::Option<::std::string::String> {
            ::core::option::Option::Some(::std::string::ToString::to_string(#value))
        }
    }
}

/// `unique(window = "..", key = path)`: a window is required.
fn unique_spec(arg: &attr::Arg) -> syn::Result<UniqueSpec> {
    let list = arg.list()?;
    let mut window = None;
    let mut key = None;
    for entry in &list.args {
        match entry.key.to_string().as_str() {
            "window" => window = Some((entry.duration()?, entry.key.span())),
            "key" => key = Some(entry.path("Self::tenant")?.clone()),
            _ => return Err(entry.unknown("unique(..)", UNIQUE_KEYS)),
        }
    }
    let Some((window, window_span)) = window else {
        return Err(arg.error(
            "`unique(..)` needs the time a job holds its key at most: \
             write `unique(window = \"10m\")`",
        ));
    };
    Ok(UniqueSpec {
        window,
        window_span,
        key,
    })
}

/// `queue = Set::Variant`: the path and the set's path.
fn queue_path(arg: &attr::Arg) -> syn::Result<(Path, Path)> {
    let path = arg.path("AppQueues::Emails")?;
    let generic = path
        .segments
        .iter()
        .any(|segment| !matches!(segment.arguments, PathArguments::None));
    if path.segments.len() < 2 || generic {
        let shown = quote!(#path).to_string().replace(' ', "");
        return Err(arg.error(format!(
            "`queue` must name a variant of a queue set, like `queue = AppQueues::Emails`, \
             not `{shown}`"
        )));
    }
    let mut set = path.clone();
    let segments: Vec<_> = set.segments.into_iter().collect();
    let kept = segments.len() - 1;
    set.segments = segments
        .into_iter()
        .take(kept)
        .collect::<Punctuated<_, _>>();
    Ok((path.clone(), set))
}

/// `name = ".."`: not blank.
fn job_name(lit: &LitStr) -> syn::Result<String> {
    let name = lit.value();
    if name.trim().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "the job name is empty or blank: write one, like `name = \"send_email\"`, or leave `name` \
             out to use the type's name",
        ));
    }
    Ok(name)
}

/// `#[job(..)]` on a field or variant would be accepted by the compiler and
/// silently ignored; refuse it.
fn refuse_inner_attributes(data: &Data) -> syn::Result<()> {
    let hint = "`#[job(..)]` goes on the job type itself, above the struct or enum, \
                not on its fields or variants";
    let check_fields = |fields: &Fields| {
        fields
            .iter()
            .try_for_each(|field| attr::refuse(&field.attrs, "job", hint))
    };
    match data {
        Data::Struct(s) => check_fields(&s.fields),
        Data::Enum(e) => e.variants.iter().try_for_each(|variant| {
            attr::refuse(&variant.attrs, "job", hint)?;
            check_fields(&variant.fields)
        }),
        Data::Union(_) => Ok(()),
    }
}
