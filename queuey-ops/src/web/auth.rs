//! Who may use the dashboard: nobody but localhost by default; a token or
//! basic auth when it listens elsewhere. CSRF tokens for every POST.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::App;

/// How requests are authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// No authentication (only sensible on a loopback address).
    None,
    /// A bearer token: `Authorization: Bearer T`, or `?token=T` once (it is
    /// then kept in a cookie).
    Token(String),
    /// HTTP basic auth.
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
}

/// Compares without stopping at the first difference.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

fn query_token(req: &Request) -> Option<String> {
    req.uri()
        .query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v.to_owned())
}

/// The authentication middleware.
pub(crate) async fn require(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    match &app.auth {
        Auth::None => next.run(req).await,
        Auth::Token(token) => {
            let headers = req.headers();
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            let from_query = query_token(&req);
            let given = bearer
                .or_else(|| cookie(headers, "queuey_token"))
                .or_else(|| from_query.clone());
            if !given.is_some_and(|g| same(&g, token)) {
                return (
                    StatusCode::UNAUTHORIZED,
                    "a token is required: open the dashboard with ?token=…",
                )
                    .into_response();
            }
            let mut response = next.run(req).await;
            let cookie = format!("queuey_token={token}; HttpOnly; SameSite=Strict; Path=/");
            if let (Some(_), Ok(v)) = (from_query, cookie.parse()) {
                response.headers_mut().insert(header::SET_COOKIE, v);
            }
            response
        }
        Auth::Basic { user, password } => {
            let expected = data_encoding::BASE64.encode(format!("{user}:{password}").as_bytes());
            let ok = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Basic "))
                .is_some_and(|given| same(given.trim(), &expected));
            if ok {
                next.run(req).await
            } else {
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Basic realm=\"queuey\"")],
                    "authentication required",
                )
                    .into_response()
            }
        }
    }
}
