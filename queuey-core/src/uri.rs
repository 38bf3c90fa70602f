//! Keeping the password of a URI out of logs, `Debug` output and error
//! messages, and the percent-encoding of URI components
//! ([`percent_decode`], [`percent_encode`]) that reading one needs.
//!
//! The backends format a broker or store address only through [`redact`],
//! and run error texts that may quote one through [`scrub`]. Both work on
//! any `scheme://user:password@host…` URI and on text that only looks like
//! one (a URI a user typed wrong).
//!
//! ```
//! use queuey_core::uri::{redact, scrub};
//!
//! let url = "amqps://app:s3cret@broker:5671/%2f";
//! assert_eq!(redact(url), "amqps://app:***@broker:5671/%2f");
//! assert_eq!(scrub("login failed for s3cret", url), "login failed for ***");
//! ```

/// What a redacted password is replaced with.
const MASK: &str = "***";

/// The URI with its password (if any) replaced by `***`.
///
/// A string that is not `scheme://…` but contains `@` is masked entirely.
pub fn redact(uri: &str) -> String {
    match split(uri) {
        Some(parts) => match parts.password {
            Some(_) => format!(
                "{}{}:{MASK}@{}",
                parts.before_user, parts.user, parts.after_at
            ),
            None => uri.to_owned(),
        },
        None if uri.contains('@') && !uri.contains("://") => MASK.to_owned(),
        None => uri.to_owned(),
    }
}

/// Removes every occurrence of the URI's password, as written and
/// percent-decoded, from `text`.
///
/// For a malformed URI holding an `@` (`amqp:user:secret@host`,
/// `user:secret@host`), every part before the `@` that could be the
/// password is removed.
pub fn scrub(text: &str, uri: &str) -> String {
    let candidates: Vec<&str> = match split(uri) {
        Some(parts) => parts.password.into_iter().collect(),
        None => loose_secrets(uri),
    };
    let mut secrets: Vec<String> = candidates
        .into_iter()
        .flat_map(|c| [c.to_owned(), percent_decode(c)])
        .collect();
    // Longest first, so that a secret holding another is masked whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(secret.as_str(), MASK);
    }
    out
}

/// The parts of a malformed URI's user info that may be a password: what
/// follows its first `:` and what follows its last.
fn loose_secrets(uri: &str) -> Vec<&str> {
    let Some(at) = uri.rfind('@') else {
        return Vec::new();
    };
    let userinfo = uri[..at].rsplit("://").next().unwrap_or_default();
    [userinfo.split_once(':'), userinfo.rsplit_once(':')]
        .into_iter()
        .flatten()
        .map(|(_, secret)| secret)
        .collect()
}

/// Whether the URI carries a password (`user:password@`), even an empty one.
pub fn has_password(uri: &str) -> bool {
    split(uri).is_some_and(|p| p.password.is_some())
}

struct Parts<'a> {
    /// `scheme://`
    before_user: &'a str,
    user: &'a str,
    password: Option<&'a str>,
    /// Host, port, vhost and query.
    after_at: &'a str,
}

fn split(uri: &str) -> Option<Parts<'_>> {
    let scheme_end = uri.find("://")? + 3;
    let rest = &uri[scheme_end..];
    // A password may hold an unescaped '/', '?' or '#', so the user info is
    // whatever precedes the last '@' anywhere: masking too much is harmless,
    // leaking a password is not.
    let at = rest.rfind('@')?;
    let userinfo = &rest[..at];
    let (user, password) = match userinfo.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (userinfo, None),
    };
    Some(Parts {
        before_user: &uri[..scheme_end],
        user,
        password,
        after_at: &rest[at + 1..],
    })
}

/// Percent-decodes a URI component (a user name, a password, a virtual
/// host). A `%` not followed by two hex digits is kept as it is; bytes that
/// are not UTF-8 become U+FFFD.
///
/// ```
/// assert_eq!(queuey_core::uri::percent_decode("a%2Fb%20c"), "a/b c");
/// ```
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = s.get(i + 1..i + 3).filter(|_| bytes[i] == b'%');
        if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes everything but the unreserved characters (letters,
/// digits, `-`, `_`, `.`, `~`), for one path segment of a URL.
///
/// ```
/// assert_eq!(queuey_core::uri::percent_encode("/"), "%2F");
/// assert_eq!(queuey_core::uri::percent_encode("q.deferred"), "q.deferred");
/// ```
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_masked() {
        assert_eq!(
            redact("amqp://guest:s3cret@localhost:5672/%2f"),
            "amqp://guest:***@localhost:5672/%2f"
        );
        assert_eq!(
            redact("amqps://app:p%40ss:w@rd@broker/vhost?heartbeat=10"),
            "amqps://app:***@broker/vhost?heartbeat=10"
        );
    }

    #[test]
    fn uris_without_a_password_are_kept() {
        for uri in [
            "amqp://localhost:5672/%2f",
            "amqp://guest@localhost/%2f",
            "amqp://localhost/%2f?auth_mechanism=external&x=a@b",
        ] {
            assert_eq!(redact(uri), uri);
        }
    }

    #[test]
    fn something_that_is_not_a_uri_is_masked_if_it_could_hold_a_secret() {
        assert_eq!(redact("guest:secret@localhost"), "***");
        assert_eq!(redact("localhost"), "localhost");
        assert_eq!(redact("amqp://u:pa/ss@h/%2f"), "amqp://u:***@h/%2f");
    }

    #[test]
    fn unescaped_query_and_fragment_characters_in_a_password_are_masked() {
        for (uri, redacted) in [
            (
                "amqp://guest:abc#123@localhost:5672/%2f",
                "amqp://guest:***@localhost:5672/%2f",
            ),
            (
                "amqp://guest:a?b@localhost/%2f",
                "amqp://guest:***@localhost/%2f",
            ),
            (
                "amqp://u:p@ss?w#rd@h/%2f?heartbeat=5",
                "amqp://u:***@h/%2f?heartbeat=5",
            ),
        ] {
            assert_eq!(redact(uri), redacted, "{uri}");
            for secret in ["abc#123", "a?b", "p@ss?w#rd"] {
                assert!(!redact(uri).contains(secret), "{uri}");
            }
        }
        let text = "connecting to amqp://guest:abc#123@localhost failed";
        assert!(!scrub(text, "amqp://guest:abc#123@localhost:5672/%2f").contains("abc#123"));
    }

    #[test]
    fn scrub_removes_the_password_of_a_malformed_uri() {
        for (uri, secret) in [
            ("amqp:guest:SECRETPASS@127.0.0.1:5672", "SECRETPASS"),
            ("guest:SECRETPASS@127.0.0.1:5672", "SECRETPASS"),
            ("amqp:guest:SE%2FCRET@host", "SE/CRET"),
        ] {
            let text = format!("bad URL {uri}: could not parse `{secret}` near {secret}");
            let scrubbed = scrub(&text, uri);
            assert!(!scrubbed.contains(secret), "{scrubbed}");
            assert!(!scrubbed.contains("SECRET"), "{scrubbed}");
        }
    }

    #[test]
    fn scrub_removes_raw_and_decoded_passwords() {
        let uri = "amqp://u:pa%24%24word@h/%2f";
        let text = "failed for pa%24%24word (pa$$word)";
        assert_eq!(scrub(text, uri), "failed for *** (***)");
        assert_eq!(scrub("nothing here", "amqp://h/%2f"), "nothing here");
    }
}
