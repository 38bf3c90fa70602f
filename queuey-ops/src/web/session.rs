//! Browser sessions and the CSRF token of each.
//!
//! Every browser gets a random session id cookie (`queuey_session`); its
//! CSRF token is an HMAC-SHA256, under a per-process key, of the session id
//! and the credential, checked in constant time: worthless in another
//! browser, after a restart, or with another credential.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use super::App;
use super::auth::{Auth, cookie};
use super::exposure::Served;
use crate::error::{OpsError, Result};

/// The session cookie's name.
const COOKIE: &str = "queuey_session";
/// Random bytes in a session id.
const ID_BYTES: usize = 16;

/// The per-process key and the credential CSRF tokens are bound to.
pub(crate) struct Sessions {
    key: hmac::Key,
    credential: Vec<u8>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sessions { key: ***, credential: *** }")
    }
}

/// One request's session, for the handlers.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    id: String,
    /// The CSRF token of this session's forms.
    pub(crate) csrf: String,
}

/// `parts`, each prefixed with its length: no two lists give the same bytes.
fn framed(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

impl Sessions {
    /// A fresh key, bound to the credential `auth` accepts.
    pub(crate) fn new(auth: &Auth) -> Result<Self> {
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
            .map_err(|_| OpsError::Invalid("the system's random number generator failed".into()))?;
        let credential = match auth {
            Auth::None => framed(&[b"none"]),
            Auth::Token(token) => framed(&[b"token", token.as_bytes()]),
            Auth::Basic { user, password } => {
                framed(&[b"basic", user.as_bytes(), password.as_bytes()])
            }
        };
        Ok(Sessions { key, credential })
    }

    /// What the CSRF token of session `id` signs.
    fn message(&self, id: &str) -> Vec<u8> {
        framed(&[b"queuey-web csrf", &self.credential, id.as_bytes()])
    }

    /// The CSRF token of session `id`.
    fn csrf(&self, id: &str) -> String {
        data_encoding::HEXLOWER.encode(hmac::sign(&self.key, &self.message(id)).as_ref())
    }

    /// Whether `given` is the CSRF token of `session` (constant time).
    pub(crate) fn verify(&self, session: &Session, given: &str) -> bool {
        data_encoding::HEXLOWER
            .decode(given.as_bytes())
            .is_ok_and(|tag| hmac::verify(&self.key, &self.message(&session.id), &tag).is_ok())
    }

    /// The session of a request: the one its cookie names, or a new one
    /// (`true`); `None` if the system could not draw a random id.
    fn session(&self, cookie_value: Option<&str>) -> Option<(Session, bool)> {
        let (id, new) = match cookie_value {
            Some(id) if is_id(id) => (id.to_owned(), false),
            _ => {
                let mut bytes = [0u8; ID_BYTES];
                SystemRandom::new().fill(&mut bytes).ok()?;
                (data_encoding::HEXLOWER.encode(&bytes), true)
            }
        };
        let csrf = self.csrf(&id);
        Some((Session { id, csrf }, new))
    }
}

/// Whether `text` has the shape of a session id this dashboard hands out.
fn is_id(text: &str) -> bool {
    text.len() == ID_BYTES * 2 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Gives each authenticated request its session, setting the cookie when new.
pub(crate) async fn attach(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let given = cookie(req.headers(), COOKIE);
    let Some((session, new)) = app.sessions.session(given.as_deref()) else {
        let why = "the system's random number generator failed; no session could be opened";
        return (StatusCode::INTERNAL_SERVER_ERROR, why).into_response();
    };
    let served = Served::of(&req);
    let id = session.id.clone();
    req.extensions_mut().insert(session);
    let mut response = next.run(req).await;
    if new {
        served.set_cookie(&mut response, COOKIE, &id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csrf_token_is_bound_to_its_session_credential_and_key() {
        let auth = Auth::Token("0123456789abcdef".into());
        let sessions = Sessions::new(&auth).unwrap();
        let (a, new) = sessions.session(None).unwrap();
        assert!(new && is_id(&a.id));
        let (again, new) = sessions.session(Some(&a.id)).unwrap();
        assert!(!new);
        assert_eq!(again.csrf, a.csrf);
        assert!(sessions.verify(&a, &a.csrf));

        let (b, _) = sessions.session(None).unwrap();
        assert_ne!(a.id, b.id);
        assert_ne!(a.csrf, b.csrf);
        assert!(!sessions.verify(&b, &a.csrf), "another browser's token");

        let restarted = Sessions::new(&auth).unwrap();
        assert!(
            !restarted.verify(&a, &a.csrf),
            "a token from before a restart"
        );
        let other_credential = Sessions::new(&Auth::Token("fedcba9876543210".into())).unwrap();
        let (same_id, _) = other_credential.session(Some(&a.id)).unwrap();
        assert_ne!(same_id.csrf, a.csrf);

        for forged in ["", "zz", &a.csrf[..10], &a.csrf.to_uppercase()] {
            assert!(!sessions.verify(&a, forged), "{forged}");
        }
    }

    #[test]
    fn a_malformed_session_cookie_gets_a_new_session() {
        let sessions = Sessions::new(&Auth::None).unwrap();
        for bad in ["", "x", "ABCDEF0123456789ABCDEF0123456789", "../../etc"] {
            let (s, new) = sessions.session(Some(bad)).unwrap();
            assert!(new && s.id != bad, "{bad}");
        }
    }

    #[test]
    fn debug_shows_no_key_or_credential() {
        let sessions = Sessions::new(&Auth::Token("0123456789abcdef-secret".into())).unwrap();
        let text = format!("{sessions:?}");
        assert!(!text.contains("secret"), "{text}");
    }
}
