//! The security headers on every response.
//!
//! The pages are plain server-rendered HTML: no script, no image, one
//! inline style sheet, forms that post to the dashboard itself. The
//! Content-Security-Policy allows exactly that (the style sheet by its
//! SHA-256 hash, so no other inline style runs), and no page may be shown
//! in a frame. Every answer may hold a payload, so none is cached.
//!
//! Each header is set by a `tower_http` [`SetResponseHeaderLayer`] around
//! the whole router ([`layer`]), so it is on every answer, the refusals
//! of the Host, Origin and authentication checks included, and replaces
//! whatever an inner handler set.

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use tower_http::set_header::SetResponseHeaderLayer;

use super::html::STYLE;

/// The headers [`layer`] sets, policy first.
pub(crate) fn all() -> impl Iterator<Item = (HeaderName, HeaderValue)> {
    let fixed = [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
        (
            HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ];
    // The style sheet by its hash: no other inline style runs.
    let hash = ring::digest::digest(&ring::digest::SHA256, STYLE.as_bytes());
    let csp = format!(
        "default-src 'none'; style-src 'sha256-{}'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'",
        data_encoding::BASE64.encode(hash.as_ref())
    );
    let csp = HeaderValue::from_str(&csp).expect("the policy is ASCII");
    std::iter::once((header::CONTENT_SECURITY_POLICY, csp))
        .chain(fixed.map(|(name, value)| (name, HeaderValue::from_static(value))))
}

/// `router` with the security headers set on every answer it gives.
pub(crate) fn layer<S>(router: Router<S>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    all().fold(router, |router, (name, value)| {
        router.layer(SetResponseHeaderLayer::overriding(name, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::html::page;

    #[test]
    fn the_policy_allows_the_pages_own_style_and_nothing_else() {
        let (_, csp) = all().next().unwrap();
        let csp = csp.to_str().unwrap();
        for directive in [
            "default-src 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(directive), "{csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        // The hash is of the exact text between <style> and </style>.
        let html = page("t", maud::html! { p { "x" } }).into_string();
        let start = html.find("<style>").unwrap() + "<style>".len();
        let end = html.find("</style>").unwrap();
        let digest = ring::digest::digest(&ring::digest::SHA256, &html.as_bytes()[start..end]);
        let hash = data_encoding::BASE64.encode(digest.as_ref());
        assert!(csp.contains(&format!("style-src 'sha256-{hash}'")), "{csp}");
        assert!(
            !html.contains(" style="),
            "an inline style attribute the policy would block"
        );
    }

    #[test]
    fn every_header_is_set() {
        let names: Vec<String> = all().map(|(n, _)| n.to_string()).collect();
        for name in [
            "content-security-policy",
            "x-frame-options",
            "referrer-policy",
            "x-content-type-options",
            "cache-control",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
    }
}
