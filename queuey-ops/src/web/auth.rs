//! Who may use the dashboard: nobody but localhost by default; a token or
//! basic auth when it listens elsewhere.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use super::exposure::Served;
use crate::error::{OpsError, Result};

/// The shortest token the dashboard accepts.
pub(crate) const MIN_TOKEN_LEN: usize = 16;

/// How requests are authenticated; `Debug` masks the token and the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    /// No authentication (only sensible on a loopback address).
    None,
    /// A bearer token: `Authorization: Bearer T`, or `?token=T` once (it is
    /// then kept in a cookie). At least [`MIN_TOKEN_LEN`] characters of
    /// printable ASCII, without space, `"`, `,`, `;` or `\`.
    Token(String),
    /// HTTP basic auth: a user (not empty, no `:`) and a password (not
    /// empty).
    Basic { user: String, password: String },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Token(_) => f.debug_tuple("Token").field(&"***").finish(),
            Auth::Basic { user, .. } => f
                .debug_struct("Basic")
                .field("user", user)
                .field("password", &"***")
                .finish(),
        }
    }
}

impl Auth {
    /// Refuses credentials that do not protect anything: an empty or short
    /// token, an empty user or password. The message never repeats them.
    pub(crate) fn validate(&self) -> Result<()> {
        let refusal = match self {
            Auth::Token(token) if token.is_empty() => format!(
                "the dashboard token is empty; give one of at least {MIN_TOKEN_LEN} characters \
                 (make one with `openssl rand -hex 16`)"
            ),
            Auth::Token(token) if token.chars().count() < MIN_TOKEN_LEN => format!(
                "the dashboard token is {} characters long; it must have at least \
                 {MIN_TOKEN_LEN} (make one with `openssl rand -hex 16`)",
                token.chars().count()
            ),
            Auth::Token(token)
                if !(token.bytes())
                    .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b',' | b';' | b'\\')) =>
            {
                "the dashboard token may only hold printable ASCII characters other than space, \
                 `\"`, `,`, `;` and `\\` (browsers keep it in a cookie)"
                    .to_owned()
            }
            Auth::Basic { user, password } if user.is_empty() || password.is_empty() => {
                "basic auth needs a user and a password, neither empty (USER:PASSWORD)".to_owned()
            }
            Auth::Basic { user, .. }
                if user.contains(':') || user.chars().any(char::is_control) =>
            {
                "the basic-auth user may not contain `:` or control characters".to_owned()
            }
            _ => return Ok(()),
        };
        Err(OpsError::Invalid(refusal))
    }
}

/// Compares without stopping at the first difference.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The value of cookie `name`, if the request carries it.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The authentication middleware.
pub(crate) async fn require(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let authorization = req.headers().get(header::AUTHORIZATION);
    let given = |scheme: &str| {
        let value = authorization.and_then(|v| v.to_str().ok())?;
        value.strip_prefix(scheme).map(str::to_owned)
    };
    match &app.config.auth {
        Auth::None => next.run(req).await,
        Auth::Token(token) => {
            let from_query = Query::<HashMap<String, String>>::try_from_uri(req.uri())
                .ok()
                .and_then(|mut q| q.0.remove("token"));
            let given = given("Bearer ")
                .or_else(|| cookie(req.headers(), "queuey_token"))
                .or_else(|| from_query.clone());
            if !given.is_some_and(|g| !token.is_empty() && same(&g, token)) {
                let why = "a token is required: open the dashboard with ?token=…";
                return (StatusCode::UNAUTHORIZED, why).into_response();
            }
            let served = Served::of(&req);
            let mut response = next.run(req).await;
            if from_query.is_some() {
                served.set_cookie(&mut response, "queuey_token", token);
            }
            response
        }
        Auth::Basic { user, password } => {
            let expected = data_encoding::BASE64.encode(format!("{user}:{password}").as_bytes());
            let ok = !user.is_empty()
                && !password.is_empty()
                && given("Basic ").is_some_and(|given| same(given.trim(), &expected));
            if ok {
                return next.run(req).await;
            }
            let challenge = [(header::WWW_AUTHENTICATE, "Basic realm=\"queuey\"")];
            (
                StatusCode::UNAUTHORIZED,
                challenge,
                "authentication required",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_credentials_are_refused() {
        for (auth, says) in [
            (Auth::Token(String::new()), "is empty"),
            (Auth::Token("s3cret".into()), "at least 16"),
            (Auth::Token("0123456789abcde".into()), "15 characters"),
            (Auth::Token("0123456789 abcdef".into()), "printable ASCII"),
            (Auth::Token("0123456789abcdef;x".into()), "printable ASCII"),
            (Auth::Token("0123456789abcdéf".into()), "printable ASCII"),
            (
                Auth::Basic {
                    user: String::new(),
                    password: String::new(),
                },
                "neither empty",
            ),
            (
                Auth::Basic {
                    user: "ops".into(),
                    password: String::new(),
                },
                "neither empty",
            ),
            (
                Auth::Basic {
                    user: String::new(),
                    password: "pw".into(),
                },
                "neither empty",
            ),
            (
                Auth::Basic {
                    user: "o:ps".into(),
                    password: "pw".into(),
                },
                "`:`",
            ),
        ] {
            let e = auth.validate().unwrap_err().to_string();
            assert!(e.contains(says), "{auth:?}: {e}");
        }
        for ok in [
            Auth::None,
            Auth::Token("0123456789abcdef".into()),
            Auth::Token("a+b/c=d-e_f.g~h!".into()),
            Auth::Basic {
                user: "ops".into(),
                password: "pw".into(),
            },
        ] {
            assert!(ok.validate().is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn messages_never_repeat_the_credential() {
        let e = Auth::Token("hunter2".into()).validate().unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn debug_masks_the_token_and_the_password() {
        let token = format!("{:?}", Auth::Token("0123456789abcdef-secret".into()));
        assert_eq!(token, "Token(\"***\")");
        let basic = format!(
            "{:?}",
            Auth::Basic {
                user: "ops".into(),
                password: "pw-secret".into()
            }
        );
        assert!(
            basic.contains("ops") && !basic.contains("secret"),
            "{basic}"
        );
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
    }
}
