//! The `limit(..)` block of `#[job(..)]`: per-key limits shared by a fleet.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Path;

use super::{Arg, ArgList};

const KEYS: &[&str] = &["key", "concurrency", "rate", "burst", "fail_open"];

/// `Rate`'s longest period: 365 days, in nanoseconds.
const MAX_PERIOD_NANOS: u128 = 365 * 86_400 * 1_000_000_000;

/// `Rate`'s shortest interval between starts: a microsecond.
const MIN_INTERVAL_NANOS: u128 = 1_000;

/// The units of a rate's period, in nanoseconds.
const UNITS: [(&str, u128); 7] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// The forms a rate takes, for error messages.
const FORMS: &str = "a count, '/', then a period: a unit (ms, s, m, h, d) or a whole number and \
                     a unit, like \"10/s\", \"600/m\", \"5/1500ms\" or \"1/30s\"";

/// `limit(key = .., concurrency = N, rate = "N/period", burst = N,
/// fail_open = true)`, every
/// value checked against the rules of `Rate::new` and `Rate::with_burst`.
pub(crate) struct LimitSpec {
    /// A field (a lone name) or a function of `&Self`.
    key: Path,
    concurrency: Option<u32>,
    rate: Option<RateSpec>,
    /// Jobs run without their limits while the store fails.
    fail_open: bool,
}

struct RateSpec {
    count: u32,
    per_nanos: u64,
    burst: u32,
}

impl LimitSpec {
    /// Parses and checks a `limit(..)` block; `arg` is the block, for errors
    /// about what it lacks.
    pub(crate) fn parse(arg: &Arg, list: &ArgList) -> syn::Result<Self> {
        let mut key = None;
        let mut concurrency = None;
        let mut rate = None;
        let mut burst: Option<(u32, &Arg)> = None;
        let mut fail_open = false;
        for entry in &list.args {
            match entry.key.to_string().as_str() {
                "key" => key = Some(entry.path("Self::host")?.clone()),
                "concurrency" => {
                    let n = entry.int(1, u64::from(u32::MAX), 3)?;
                    concurrency = u32::try_from(n).ok();
                }
                "rate" => rate = Some(rate_of(entry)?),
                "burst" => {
                    let n = entry.int(1, u64::from(u32::MAX), 5)?;
                    burst = u32::try_from(n).ok().map(|n| (n, entry));
                }
                "fail_open" => fail_open = entry.bool()?,
                _ => return Err(entry.unknown("limit(..)", KEYS)),
            }
        }
        let Some(key) = key else {
            return Err(arg.error(
                "`limit(..)` needs the key jobs are limited by: write \
                 `limit(key = Self::host, ...)` (a function of `&Self`) or `key = field`",
            ));
        };
        if concurrency.is_none() && rate.is_none() {
            return Err(arg.error(
                "`limit(..)` needs a limit: `concurrency = 3` (at most 3 jobs of a key run at \
                 once), `rate = \"10/s\"` (at most 10 start per second), or both",
            ));
        }
        let rate = match (rate, burst) {
            (Some((count, per_nanos)), burst) => Some(RateSpec {
                count,
                per_nanos,
                burst: burst.map_or(1, |(n, _)| n),
            }),
            (None, Some((_, entry))) => {
                return Err(entry.error(
                    "`burst` goes with a `rate`: add one, like `rate = \"10/s\", burst = 5`",
                ));
            }
            (None, None) => None,
        };
        Ok(LimitSpec {
            key,
            concurrency,
            rate,
            fail_open,
        })
    }

    /// `fn limit_key(&self)` and `fn limits()` of the `Job` impl.
    pub(crate) fn to_tokens(&self, core: &TokenStream) -> TokenStream {
        let key = &self.key;
        // A lone name is a field; a path is a function of `&Self`.
        let value = match key.get_ident() {
            Some(field) => quote!(&self.#field),
            None => quote!(&#key(self)),
        };
        let concurrency = self.concurrency.map(|n| {
            quote! {
                let limits = match ::core::num::NonZeroU32::new(#n) {
                    ::core::option::Option::Some(n) => limits.with_concurrency(n),
                    ::core::option::Option::None => limits,
                };
            }
        });
        let rate = self.rate.as_ref().map(|rate| {
            let RateSpec {
                count,
                per_nanos,
                burst,
            } = rate;
            // Checked by the derive against the rules of `Rate::new` and
            // `Rate::with_burst`, so the error arm is never taken.
            quote! {
                let rate = #core::store::Rate::new(
                    #count,
                    #core::__private::Duration::from_nanos(#per_nanos),
                )
                .and_then(|rate| rate.with_burst(#burst));
                let limits = match rate {
                    ::core::result::Result::Ok(rate) => limits.with_rate(rate),
                    ::core::result::Result::Err(_) => limits,
                };
            }
        });
        let fail_open = self
            .fail_open
            .then(|| quote!(let limits = limits.with_fail_open();));
        quote! {
            fn limit_key(&self) -> ::core::option::Option<::std::string::String> {
                ::core::option::Option::Some(::std::string::ToString::to_string(#value))
            }

            fn limits() -> ::core::option::Option<#core::Limits> {
                let limits = #core::Limits::new();
                #concurrency
                #rate
                #fail_open
                ::core::option::Option::Some(limits)
            }
        }
    }
}

/// `rate = "10/s"`: a count and a period in nanoseconds, checked.
fn rate_of(arg: &Arg) -> syn::Result<(u32, u64)> {
    let text = arg.string("\"10/s\"")?.value();
    parse_rate(&text).map_err(|why| arg.error(why))
}

/// Parses `count/period` and checks it as `Rate::new` does.
fn parse_rate(text: &str) -> Result<(u32, u64), String> {
    let Some((count, period)) = text.trim().split_once('/') else {
        return Err(format!("`{text}` is not a rate: give {FORMS}"));
    };
    let count: u32 = match count.trim().parse() {
        Ok(0) => {
            return Err(format!(
                "`{text}` lets nothing start: give a count of at least 1, like \"10/s\""
            ));
        }
        Ok(n) => n,
        Err(_) => {
            return Err(format!(
                "`{text}` does not start with a whole count: give {FORMS}"
            ));
        }
    };
    let period = period.trim();
    let digits_end = period
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(period.len());
    let (amount, unit) = period.split_at(digits_end);
    let unit = unit.trim();
    let amount: u128 = if amount.is_empty() {
        1
    } else {
        amount
            .parse()
            .map_err(|_| format!("`{text}` has a period too long to read: give {FORMS}"))?
    };
    let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!(
            "`{text}` has no known unit after '/' (`{unit}`): give {FORMS}"
        ));
    };
    let nanos = amount.saturating_mul(scale);
    if nanos == 0 {
        return Err(format!(
            "`{text}` is over a period of zero: give a period of at least 1 ms, like \"10/s\""
        ));
    }
    if nanos > MAX_PERIOD_NANOS {
        return Err(format!(
            "`{text}` is over a period longer than 365 days: give a shorter one"
        ));
    }
    if nanos / u128::from(count) < MIN_INTERVAL_NANOS {
        return Err(format!(
            "`{text}` spaces starts by less than a microsecond: give at most a million per \
             second, or no rate at all"
        ));
    }
    let nanos = u64::try_from(nanos).map_err(|_| format!("`{text}` has a period too long"))?;
    Ok((count, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_the_core_reads_them() {
        assert_eq!(parse_rate("10/s"), Ok((10, 1_000_000_000)));
        assert_eq!(parse_rate("600/m"), Ok((600, 60_000_000_000)));
        assert_eq!(parse_rate("3/h"), Ok((3, 3_600_000_000_000)));
        assert_eq!(parse_rate("5/1500ms"), Ok((5, 1_500_000_000)));
        assert_eq!(parse_rate(" 1 / 30s "), Ok((1, 30_000_000_000)));
        assert_eq!(parse_rate("1/365d"), Ok((1, 365 * 86_400 * 1_000_000_000)));
    }

    #[test]
    fn bad_rates_say_what_to_write() {
        for (text, says) in [
            ("10", "not a rate"),
            ("0/s", "at least 1"),
            ("x/s", "whole count"),
            ("10/sec", "no known unit"),
            ("10/0s", "period of zero"),
            ("1/366d", "365 days"),
            ("2000000/s", "microsecond"),
            ("1/1.5s", "no known unit"),
        ] {
            let error = parse_rate(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
