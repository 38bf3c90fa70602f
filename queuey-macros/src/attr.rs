//! Attribute parsing shared by both derives.
//!
//! Every attribute is a comma-separated list of `key = value` and
//! `key(nested list)` entries. [`collect`] gathers the lists of all
//! attributes with one name (so `#[queue(a = 1)] #[queue(b = 2)]` is the same
//! as `#[queue(a = 1, b = 2)]`), refusing a key given twice. Each derive then
//! walks the entries, matching on the key and reading the value with the typed
//! accessors of [`Arg`], which turn every mistake into an error spanned on the
//! offending token.

mod duration;
mod limit;
mod retry;

use proc_macro2::{Group, TokenTree};
use syn::parse::{Parse, ParseStream, Parser};
use syn::{Attribute, Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Path, Token, UnOp, token};

pub(crate) use duration::Millis;
pub(crate) use limit::LimitSpec;
pub(crate) use retry::RetrySpec;

/// The keys whose value is a type (`output = Vec<String>`), which does not
/// parse as an expression.
const TYPE_KEYS: &[&str] = &["output"];

/// One `key = value` or `key(..)` entry.
pub(crate) struct Arg {
    /// The key, which error messages name and point at.
    pub(crate) key: Ident,
    value: Value,
}

enum Value {
    /// `key = value`
    Expr(Expr),
    /// `key = Type`, for the keys in [`TYPE_KEYS`].
    Type(Box<syn::Type>),
    /// `key(..)`, parsed only when the key turns out to take a block, so
    /// `prefetch(3)` is reported as "takes a value", not as a bad entry.
    List(Group),
}

/// The entries of one attribute (or of several with the same name), or of a
/// nested `key(..)` block.
pub(crate) struct ArgList {
    pub(crate) args: Vec<Arg>,
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if !input.peek(Ident) {
            return Err(input.error("expected a key, like `name = \"emails\"`"));
        }
        let key: Ident = input.parse()?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            if TYPE_KEYS.iter().any(|k| key == k) {
                if input.peek(LitStr) {
                    let lit: LitStr = input.parse()?;
                    return Err(syn::Error::new(
                        lit.span(),
                        format!(
                            "`{key}` expects a type, not a string: write `{key} = {}` without quotes",
                            lit.value()
                        ),
                    ));
                }
                Value::Type(input.parse()?)
            } else {
                Value::Expr(input.parse()?)
            }
        } else if input.peek(token::Paren) {
            Value::List(input.parse()?)
        } else {
            return Err(syn::Error::new(
                key.span(),
                format!("`{key}` needs a value: write `{key} = ...` (or `{key}(...)` for a block)"),
            ));
        };
        Ok(Arg { key, value })
    }
}

impl Parse for ArgList {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let args = input.parse_terminated(Arg::parse, Token![,])?;
        let list = ArgList {
            args: args.into_iter().collect(),
        };
        list.refuse_duplicates()?;
        Ok(list)
    }
}

impl ArgList {
    fn refuse_duplicates(&self) -> syn::Result<()> {
        for (i, arg) in self.args.iter().enumerate() {
            if self.args[..i].iter().any(|earlier| earlier.key == arg.key) {
                return Err(syn::Error::new(
                    arg.key.span(),
                    format!("duplicate key `{}`: give each key once", arg.key),
                ));
            }
        }
        Ok(())
    }
}

/// Parses every `#[name(..)]` attribute in `attrs` into one list.
///
/// `None` when there is no such attribute at all, so a derive can tell
/// "missing" from "empty".
pub(crate) fn collect(attrs: &[Attribute], name: &str) -> syn::Result<Option<ArgList>> {
    let mut merged: Option<ArgList> = None;
    for attr in attrs.iter().filter(|attr| attr.path().is_ident(name)) {
        let list = match &attr.meta {
            syn::Meta::List(list) => list.parse_args::<ArgList>()?,
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    format!("expected a list of settings: `#[{name}(key = value, ...)]`"),
                ));
            }
        };
        match &mut merged {
            Some(all) => all.args.extend(list.args),
            None => merged = Some(list),
        }
    }
    if let Some(all) = &merged {
        all.refuse_duplicates()?;
    }
    Ok(merged)
}

/// Refuses an attribute named `name` wherever it appears in `attrs`: for
/// helper attributes put on the wrong item, which the compiler accepts and
/// would otherwise silently ignore.
pub(crate) fn refuse(attrs: &[Attribute], name: &str, message: &str) -> syn::Result<()> {
    match attrs.iter().find(|attr| attr.path().is_ident(name)) {
        Some(attr) => Err(syn::Error::new_spanned(attr, message)),
        None => Ok(()),
    }
}

impl Arg {
    /// The error for a key the attribute does not know.
    pub(crate) fn unknown(&self, attribute: &str, known: &[&str]) -> syn::Error {
        syn::Error::new(
            self.key.span(),
            format!(
                "unknown key `{}` in `{attribute}`; expected one of: {}",
                self.key,
                known.join(", ")
            ),
        )
    }

    /// An error covering the value (or the key, for a block).
    pub(crate) fn error(&self, message: impl std::fmt::Display) -> syn::Error {
        match &self.value {
            Value::Expr(expr) => syn::Error::new_spanned(expr, message),
            Value::Type(ty) => syn::Error::new_spanned(ty, message),
            Value::List(_) => syn::Error::new(self.key.span(), message),
        }
    }

    /// The value of `key = value`, with invisible macro groups peeled off.
    fn expr(&self) -> syn::Result<&Expr> {
        match &self.value {
            Value::Expr(expr) => {
                let mut expr = expr;
                while let Expr::Group(group) = expr {
                    expr = &group.expr;
                }
                Ok(expr)
            }
            Value::Type(ty) => Err(syn::Error::new_spanned(
                ty,
                format!("`{}` takes a type here, not a value", self.key),
            )),
            Value::List(_) => Err(syn::Error::new(
                self.key.span(),
                format!(
                    "`{0}` takes a value: write `{0} = ...`, not `{0}(...)`",
                    self.key
                ),
            )),
        }
    }

    fn lit(&self) -> syn::Result<Option<&Lit>> {
        Ok(match self.expr()? {
            Expr::Lit(ExprLit { lit, .. }) => Some(lit),
            _ => None,
        })
    }

    /// The nested entries of `key(..)`.
    pub(crate) fn list(&self) -> syn::Result<ArgList> {
        match &self.value {
            // Parsed through the group itself, so an error at the end of the
            // block points at its closing parenthesis.
            Value::List(group) => {
                let parser = |input: ParseStream<'_>| {
                    let content;
                    syn::parenthesized!(content in input);
                    content.parse::<ArgList>()
                };
                parser.parse2(TokenTree::Group(group.clone()).into())
            }
            Value::Expr(expr) => Err(syn::Error::new_spanned(
                expr,
                format!(
                    "`{0}` takes a block of settings: write `{0}(...)`",
                    self.key
                ),
            )),
            Value::Type(ty) => Err(syn::Error::new_spanned(
                ty,
                format!(
                    "`{0}` takes a block of settings: write `{0}(...)`",
                    self.key
                ),
            )),
        }
    }

    /// A string literal; `example` shows the user what to write.
    pub(crate) fn string(&self, example: &str) -> syn::Result<LitStr> {
        match self.lit()? {
            Some(Lit::Str(s)) => Ok(s.clone()),
            _ => Err(self.error(format!(
                "`{}` expects a string literal, like `{} = {example}`",
                self.key, self.key
            ))),
        }
    }

    /// `true` or `false`.
    pub(crate) fn bool(&self) -> syn::Result<bool> {
        match self.lit()? {
            Some(Lit::Bool(b)) => Ok(b.value),
            _ => Err(self.error(format!("`{}` expects `true` or `false`", self.key))),
        }
    }

    /// An integer literal within `min..=max`.
    pub(crate) fn int(&self, min: u64, max: u64, example: u64) -> syn::Result<u64> {
        let out_of_range = |shown: &dyn std::fmt::Display| {
            self.error(format!(
                "`{}` must be between {min} and {max}, got {shown}",
                self.key
            ))
        };
        match self.expr()? {
            Expr::Lit(ExprLit {
                lit: Lit::Int(int), ..
            }) => match int.base10_parse::<u64>() {
                Ok(value) if (min..=max).contains(&value) => Ok(value),
                _ => Err(out_of_range(&int.base10_digits())),
            },
            Expr::Unary(ExprUnary {
                op: UnOp::Neg(_),
                expr,
                ..
            }) if matches!(
                &**expr,
                Expr::Lit(ExprLit {
                    lit: Lit::Int(_),
                    ..
                })
            ) =>
            {
                let shown = quote::quote!(#expr).to_string();
                Err(out_of_range(&format_args!("-{shown}")))
            }
            _ => Err(self.error(format!(
                "`{}` expects an integer, like `{} = {example}`",
                self.key, self.key
            ))),
        }
    }

    /// An integer or float literal (a leading `-` allowed), as `f64`.
    pub(crate) fn number(&self, example: &str) -> syn::Result<f64> {
        let (negative, expr) = match self.expr()? {
            Expr::Unary(ExprUnary {
                op: UnOp::Neg(_),
                expr,
                ..
            }) => (true, &**expr),
            expr => (false, expr),
        };
        let magnitude = match expr {
            Expr::Lit(ExprLit {
                lit: Lit::Int(int), ..
            }) => int.base10_parse::<f64>(),
            Expr::Lit(ExprLit {
                lit: Lit::Float(float),
                ..
            }) => float.base10_parse::<f64>(),
            _ => {
                return Err(self.error(format!(
                    "`{}` expects a number, like `{} = {example}`",
                    self.key, self.key
                )));
            }
        }?;
        Ok(if negative { -magnitude } else { magnitude })
    }

    /// A duration string such as `"30s"`, longer than zero.
    pub(crate) fn duration(&self) -> syn::Result<Millis> {
        let text = match self.lit()? {
            Some(Lit::Str(s)) => s.value(),
            Some(Lit::Int(int)) => {
                return Err(self.error(format!(
                    "`{}` expects a duration string with a unit: write \"{}s\" for seconds \
                     or \"{}ms\" for milliseconds",
                    self.key,
                    int.base10_digits(),
                    int.base10_digits()
                )));
            }
            _ => {
                return Err(self.error(format!(
                    "`{}` expects a duration string, like `{} = \"30s\"` \
                     (units: ms, s, m, h, d)",
                    self.key, self.key
                )));
            }
        };
        let millis = Millis::parse(&text).map_err(|why| self.error(why))?;
        if millis.get() == 0 {
            return Err(self.error(format!(
                "`{}` must be longer than zero{}",
                self.key,
                duration::zero_hint(&self.key.to_string())
            )));
        }
        Ok(millis)
    }

    /// A type such as `Vec<String>`, for a key in [`TYPE_KEYS`].
    pub(crate) fn ty(&self) -> syn::Result<&syn::Type> {
        match &self.value {
            Value::Type(ty) => Ok(ty),
            Value::Expr(_) | Value::List(_) => Err(syn::Error::new(
                self.key.span(),
                format!("`{0}` takes a type: write `{0} = SomeType`", self.key),
            )),
        }
    }

    /// A path such as `AppQueues::Emails`.
    pub(crate) fn path(&self, example: &str) -> syn::Result<&Path> {
        match self.expr()? {
            Expr::Path(path) if path.qself.is_none() => Ok(&path.path),
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => Err(self.error(format!(
                "`{}` expects a path, not a string: write `{} = {}` without quotes",
                self.key,
                self.key,
                s.value()
            ))),
            _ => Err(self.error(format!(
                "`{}` expects a path, like `{} = {example}`",
                self.key, self.key
            ))),
        }
    }
}
