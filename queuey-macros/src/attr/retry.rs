//! The `retry(..)` block shared by `#[queue(..)]` and `#[job(..)]`.

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use syn::Ident;

use super::{Arg, ArgList, Millis};

const KEYS: &[&str] = &[
    "max_attempts",
    "backoff",
    "delay",
    "base",
    "factor",
    "max",
    "jitter",
];

/// `RetryPolicy::DEFAULT_MAX_ATTEMPTS`.
const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// `ExponentialBackoff::default()`: 1 s, doubling, capped at 5 minutes, jitter on.
const DEFAULT_BASE: Millis = Millis::from_millis(1_000);
const DEFAULT_FACTOR: f64 = 2.0;
const DEFAULT_MAX: Millis = Millis::from_millis(300_000);

/// A retry policy whose every value was checked against the rules of
/// `RetryPolicy::new` and the `Backoff` constructors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetrySpec {
    max_attempts: u32,
    backoff: BackoffSpec,
}

#[derive(Debug, Clone, PartialEq)]
enum BackoffSpec {
    None,
    Fixed(Millis),
    Exponential {
        base: Millis,
        factor: f64,
        max: Millis,
        jitter: bool,
    },
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    None,
    Fixed,
    Exponential,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Fixed => "fixed",
            Kind::Exponential => "exponential",
        }
    }

    /// The keys besides `max_attempts` and `backoff` this kind accepts.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::None => &[],
            Kind::Fixed => &["delay"],
            Kind::Exponential => &["base", "factor", "max", "jitter"],
        }
    }

    /// The kind a backoff-specific key belongs to.
    fn owning(key: &str) -> Kind {
        if key == "delay" {
            Kind::Fixed
        } else {
            Kind::Exponential
        }
    }
}

/// The values given, each with its key for error spans.
#[derive(Default)]
struct Given<'a> {
    max_attempts: Option<u32>,
    kind: Option<(Kind, &'a Arg)>,
    delay: Option<Millis>,
    base: Option<(Millis, &'a Arg)>,
    factor: Option<f64>,
    max: Option<(Millis, &'a Arg)>,
    jitter: Option<bool>,
    /// Backoff-specific keys, to check against the kind once it is known.
    specific: Vec<&'a Ident>,
}

impl RetrySpec {
    /// Parses and checks a `retry(..)` block.
    pub(crate) fn parse(list: &ArgList) -> syn::Result<Self> {
        let mut given = Given::default();
        for arg in &list.args {
            match arg.key.to_string().as_str() {
                "max_attempts" => {
                    let n = arg.int(1, u64::from(u32::MAX), 3)?;
                    given.max_attempts = u32::try_from(n).ok();
                }
                "backoff" => given.kind = Some((kind(arg)?, arg)),
                "delay" => given.delay = Some(within_a_hold(arg)?),
                "base" => given.base = Some((arg.duration()?, arg)),
                "max" => given.max = Some((within_a_hold(arg)?, arg)),
                "factor" => given.factor = Some(factor(arg)?),
                "jitter" => given.jitter = Some(arg.bool()?),
                _ => return Err(arg.unknown("retry(..)", KEYS)),
            }
            if !matches!(arg.key.to_string().as_str(), "max_attempts" | "backoff") {
                given.specific.push(&arg.key);
            }
        }
        let chosen = given.kind.map_or(Kind::Exponential, |(kind, _)| kind);
        for key in &given.specific {
            let key_name = key.to_string();
            if !chosen.keys().contains(&key_name.as_str()) {
                return Err(misplaced(key, chosen, given.kind.is_some()));
            }
        }
        let backoff = match chosen {
            Kind::None => BackoffSpec::None,
            Kind::Fixed => match given.delay {
                Some(delay) => BackoffSpec::Fixed(delay),
                None => {
                    let backoff = given.kind.map(|(_, arg)| arg);
                    let message = "fixed backoff needs a delay: add `delay = \"10s\"` \
                                   (or use `backoff = \"none\"` to retry without waiting)";
                    return Err(match backoff {
                        Some(arg) => arg.error(message),
                        None => syn::Error::new(proc_macro2::Span::call_site(), message),
                    });
                }
            },
            Kind::Exponential => exponential(&given)?,
        };
        Ok(RetrySpec {
            max_attempts: given.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            backoff,
        })
    }

    /// An expression building the policy through the validated constructors.
    ///
    /// The constructors cannot fail on values `parse` accepted; the fallbacks
    /// (`Backoff::none()`, `RetryPolicy::default()`) only keep the generated
    /// code free of panics.
    pub(crate) fn to_tokens(&self, core: &TokenStream) -> TokenStream {
        let ms = |d: Millis| {
            let lit = Literal::u64_suffixed(d.get());
            quote!(#core::__private::Duration::from_millis(#lit))
        };
        let backoff = match &self.backoff {
            BackoffSpec::None => quote!(::core::result::Result::Ok(#core::Backoff::none())),
            BackoffSpec::Fixed(delay) => {
                let delay = ms(*delay);
                quote!(#core::Backoff::fixed(#delay))
            }
            BackoffSpec::Exponential {
                base,
                factor,
                max,
                jitter,
            } => {
                let (base, max) = (ms(*base), ms(*max));
                let factor = Literal::f64_suffixed(*factor);
                let jitter = if *jitter {
                    quote!()
                } else {
                    quote!(.map(#core::Backoff::without_jitter))
                };
                quote!(#core::Backoff::exponential(#base, #factor, #max) #jitter)
            }
        };
        let max_attempts = Literal::u32_suffixed(self.max_attempts);
        quote! {
            {
                let backoff: ::core::result::Result<#core::Backoff, #core::InvalidBackoff> =
                    #backoff;
                match backoff.map(|backoff| #core::RetryPolicy::new(#max_attempts, backoff)) {
                    ::core::result::Result::Ok(::core::result::Result::Ok(policy)) => policy,
                    _ => #core::RetryPolicy::default(),
                }
            }
        }
    }
}

/// `backoff = "none" | "fixed" | "exponential"`.
fn kind(arg: &Arg) -> syn::Result<Kind> {
    let text = arg.string("\"exponential\"")?;
    match text.value().as_str() {
        "none" => Ok(Kind::None),
        "fixed" => Ok(Kind::Fixed),
        "exponential" => Ok(Kind::Exponential),
        other => Err(arg.error(format!(
            "unknown backoff `{other}`: use \"none\", \"fixed\" or \"exponential\""
        ))),
    }
}

/// `factor`: finite and at least 1, as `ExponentialBackoff::new` requires.
fn factor(arg: &Arg) -> syn::Result<f64> {
    let value = arg.number("2")?;
    if !value.is_finite() {
        return Err(arg.error("`factor` must be a finite number, like `factor = 2`"));
    }
    if value < 1.0 {
        return Err(arg.error(format!(
            "`factor` must be at least 1 (got {value}); a factor below 1 would shrink the \
             wait, use `backoff = \"fixed\"` for a constant one"
        )));
    }
    Ok(value)
}

/// A key that does not belong to the chosen backoff kind.
fn misplaced(key: &Ident, chosen: Kind, kind_given: bool) -> syn::Error {
    let owner = Kind::owning(&key.to_string());
    let chosen_text = if kind_given {
        format!("`backoff = \"{}\"`", chosen.name())
    } else {
        "the default exponential backoff".to_owned()
    };
    let accepted = match chosen.keys() {
        [] => "it takes no other keys".to_owned(),
        keys => format!("it takes {}", list(keys)),
    };
    let message = if kind_given {
        format!(
            "`{key}` does not apply to {chosen_text} ({accepted}); \
             it belongs to `backoff = \"{}\"`",
            owner.name()
        )
    } else {
        format!(
            "`{key}` does not apply to {chosen_text} ({accepted}); \
             add `backoff = \"{}\"` to use it",
            owner.name()
        )
    };
    syn::Error::new(key.span(), message)
}

/// `a`, `b` and `c`.
fn list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// The longest wait a hold accepts: `queuey_core::LONGEST_WAIT`, 24 days,
/// which `Backoff::fixed` and `Backoff::exponential` enforce too (the UI tests
/// `max_24_days` and `max_too_long` pin the boundary).
const LONGEST_WAIT: Millis = Millis::from_millis(24 * 24 * 60 * 60 * 1000);

/// A `delay` or `max` duration, refused past [`LONGEST_WAIT`].
fn within_a_hold(arg: &Arg) -> syn::Result<Millis> {
    let duration = arg.duration()?;
    if duration.get() > LONGEST_WAIT.get() {
        return Err(arg.error(format!(
            "`{}` is {duration}, longer than the longest wait a hold accepts ({LONGEST_WAIT}); \
             a job that must wait longer needs a scheduler, not a retry",
            arg.key
        )));
    }
    Ok(duration)
}

/// The exponential backoff, defaults filled in, `base <= max` checked.
fn exponential(given: &Given<'_>) -> syn::Result<BackoffSpec> {
    let base = given.base.map_or(DEFAULT_BASE, |(d, _)| d);
    let max = given.max.map_or(DEFAULT_MAX, |(d, _)| d);
    if base > max {
        let message = |which: &str| {
            format!(
                "the backoff base ({base}) is longer than its max ({max}{which}); \
                 raise `max` or lower `base`"
            )
        };
        return Err(match (given.base, given.max) {
            (Some((_, arg)), None) => arg.error(message(", the default")),
            (None, Some((_, arg))) => arg.error(format!(
                "the backoff max ({max}) is shorter than its base ({base}, the default); \
                 raise `max` or lower `base`"
            )),
            (Some((_, arg)), Some(_)) => arg.error(message("")),
            // Unreachable: the defaults are in order.
            (None, None) => syn::Error::new(proc_macro2::Span::call_site(), message("")),
        });
    }
    Ok(BackoffSpec::Exponential {
        base,
        factor: given.factor.unwrap_or(DEFAULT_FACTOR),
        max,
        jitter: given.jitter.unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(tokens: TokenStream) -> syn::Result<RetrySpec> {
        RetrySpec::parse(&syn::parse2(tokens)?)
    }

    fn error(tokens: TokenStream) -> String {
        parse(tokens).unwrap_err().to_string()
    }

    #[test]
    fn defaults_match_the_core_defaults() {
        let spec = parse(quote!()).unwrap();
        assert_eq!(
            spec,
            RetrySpec {
                max_attempts: 5,
                backoff: BackoffSpec::Exponential {
                    base: Millis::from_millis(1_000),
                    factor: 2.0,
                    max: Millis::from_millis(300_000),
                    jitter: true,
                },
            }
        );
    }

    #[test]
    fn kinds() {
        let none = parse(quote!(backoff = "none", max_attempts = 2)).unwrap();
        assert_eq!(none.backoff, BackoffSpec::None);
        assert_eq!(none.max_attempts, 2);
        let fixed = parse(quote!(backoff = "fixed", delay = "3s")).unwrap();
        assert_eq!(
            fixed.backoff,
            BackoffSpec::Fixed(Millis::from_millis(3_000))
        );
        let exp = parse(quote!(factor = 1.5, jitter = false, max = "1h")).unwrap();
        assert_eq!(
            exp.backoff,
            BackoffSpec::Exponential {
                base: DEFAULT_BASE,
                factor: 1.5,
                max: Millis::from_millis(3_600_000),
                jitter: false,
            }
        );
    }

    #[test]
    fn keys_must_fit_the_kind() {
        assert!(error(quote!(delay = "1s")).contains("add `backoff = \"fixed\"`"));
        assert!(error(quote!(backoff = "none", jitter = true)).contains("takes no other keys"));
        assert!(
            error(quote!(backoff = "fixed", delay = "1s", base = "1s"))
                .contains("it takes `delay`")
        );
        assert!(error(quote!(backoff = "fixed")).contains("needs a delay"));
    }

    #[test]
    fn waits_longer_than_a_hold_are_refused() {
        assert!(parse(quote!(max = "24d")).is_ok());
        assert!(
            error(quote!(max = "25d"))
                .contains("longer than the longest wait a hold accepts (24d)")
        );
        assert!(error(quote!(backoff = "fixed", delay = "30d")).contains("`delay` is 30d"));
    }

    #[test]
    fn base_above_max() {
        assert!(error(quote!(base = "10m")).contains("max (5m, the default)"));
        assert!(error(quote!(max = "500ms")).contains("base (1s, the default)"));
        assert!(
            error(quote!(base = "2s", max = "1s")).contains("(2s) is longer than its max (1s)")
        );
    }

    #[test]
    fn list_reads_naturally() {
        assert_eq!(list(&["a"]), "`a`");
        assert_eq!(list(&["a", "b", "c"]), "`a`, `b` and `c`");
    }
}
