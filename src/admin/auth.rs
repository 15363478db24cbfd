//! Who may act: the admin token, given once on the login form (then an HttpOnly,
//! SameSite=Strict session cookie whose forms carry a CSRF token) or on every API request as
//! `Authorization: Bearer`. Without a configured token the admin is read-only.

use std::collections::HashMap;
use std::sync::Mutex;

use actix_web::HttpRequest;
use actix_web::cookie::{Cookie, SameSite};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "history_session";

/// Why a request may not act.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("admin actions are disabled: the service runs without --admin-token (read-only)")]
    ReadOnly,
    #[error("sign in with the admin token first")]
    NotSignedIn,
    #[error("the admin token is wrong")]
    WrongToken,
    #[error("the form's CSRF token is missing or stale; reload the page and try again")]
    Csrf,
}

/// How a request proved itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// `Authorization: Bearer <token>`; not sent by browsers on their own, so no CSRF check.
    Bearer,
    /// A signed-in browser session; its forms must echo `csrf`.
    Session { id: String, csrf: String },
}

impl Principal {
    /// How the audit trail names the actor.
    pub fn describe(&self, request: &HttpRequest) -> String {
        let peer = request
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_else(|| "unknown".into());
        match self {
            Principal::Bearer => format!("api token from {peer}"),
            Principal::Session { id, .. } => format!("session {} from {peer}", &id[..8]),
        }
    }
}

/// The token and the signed-in sessions (in memory: a restart signs everybody out).
pub struct Auth {
    token: Option<String>,
    sessions: Mutex<HashMap<String, String>>,
}

impl Auth {
    pub fn new(token: Option<String>) -> Self {
        Auth {
            token,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    pub fn read_only(&self) -> bool {
        self.token.is_none()
    }

    /// Checks a token typed on the login form; on success a new session and its cookie.
    pub fn sign_in(&self, token: &str) -> Result<Cookie<'static>, Denied> {
        let expected = self.token.as_deref().ok_or(Denied::ReadOnly)?;
        if !constant_time_eq(expected.as_bytes(), token.as_bytes()) {
            return Err(Denied::WrongToken);
        }
        let id = random_hex();
        self.sessions
            .lock()
            .expect("sessions lock")
            .insert(id.clone(), random_hex());
        Ok(Cookie::build(SESSION_COOKIE, id)
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .finish())
    }

    /// Forgets the request's session; the cookie that clears it in the browser.
    pub fn sign_out(&self, request: &HttpRequest) -> Cookie<'static> {
        if let Some(cookie) = request.cookie(SESSION_COOKIE) {
            self.sessions
                .lock()
                .expect("sessions lock")
                .remove(cookie.value());
        }
        let mut cookie = Cookie::build(SESSION_COOKIE, "")
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .finish();
        cookie.make_removal();
        cookie
    }

    /// The session of a browser request, if signed in.
    pub fn session(&self, request: &HttpRequest) -> Option<Principal> {
        let cookie = request.cookie(SESSION_COOKIE)?;
        let sessions = self.sessions.lock().expect("sessions lock");
        let csrf = sessions.get(cookie.value())?;
        Some(Principal::Session {
            id: cookie.value().to_owned(),
            csrf: csrf.clone(),
        })
    }

    /// Who is asking to act: a bearer token or a session (whose form must carry `csrf`).
    pub fn authorize(
        &self,
        request: &HttpRequest,
        csrf: Option<&str>,
    ) -> Result<Principal, Denied> {
        let expected = self.token.as_deref().ok_or(Denied::ReadOnly)?;
        if let Some(header) = request
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
        {
            let given = header
                .to_str()
                .ok()
                .and_then(|h| h.strip_prefix("Bearer "))
                .ok_or(Denied::WrongToken)?;
            return if constant_time_eq(expected.as_bytes(), given.trim().as_bytes()) {
                Ok(Principal::Bearer)
            } else {
                Err(Denied::WrongToken)
            };
        }
        let session = self.session(request).ok_or(Denied::NotSignedIn)?;
        match (&session, csrf) {
            (Principal::Session { csrf: expected, .. }, Some(given))
                if constant_time_eq(expected.as_bytes(), given.as_bytes()) =>
            {
                Ok(session)
            }
            _ => Err(Denied::Csrf),
        }
    }
}

fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares without an early exit, so response times do not leak the token's prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn without_a_token_nothing_may_act() {
        let auth = Auth::new(None);
        let request = TestRequest::default()
            .insert_header(("Authorization", "Bearer anything"))
            .to_http_request();
        assert_eq!(auth.authorize(&request, None), Err(Denied::ReadOnly));
        assert_eq!(auth.sign_in("anything").unwrap_err(), Denied::ReadOnly);
    }

    #[test]
    fn a_bearer_token_must_match() {
        let auth = Auth::new(Some("s3cret-token".into()));
        let good = TestRequest::default()
            .insert_header(("Authorization", "Bearer s3cret-token"))
            .to_http_request();
        assert_eq!(auth.authorize(&good, None), Ok(Principal::Bearer));
        let bad = TestRequest::default()
            .insert_header(("Authorization", "Bearer s3cret-tokeN"))
            .to_http_request();
        assert_eq!(auth.authorize(&bad, None), Err(Denied::WrongToken));
    }

    #[test]
    fn a_session_must_echo_its_csrf_token() {
        let auth = Auth::new(Some("s3cret-token".into()));
        let cookie = auth.sign_in("s3cret-token").unwrap();
        assert!(cookie.http_only().unwrap_or(false));
        assert_eq!(cookie.same_site(), Some(SameSite::Strict));
        let request = TestRequest::default().cookie(cookie).to_http_request();
        let Some(Principal::Session { csrf, .. }) = auth.session(&request) else {
            panic!("signed in");
        };
        assert_eq!(auth.authorize(&request, None), Err(Denied::Csrf));
        assert_eq!(auth.authorize(&request, Some("forged")), Err(Denied::Csrf));
        assert!(auth.authorize(&request, Some(&csrf)).is_ok());
        let anonymous = TestRequest::default().to_http_request();
        assert_eq!(
            auth.authorize(&anonymous, Some(&csrf)),
            Err(Denied::NotSignedIn)
        );
    }
}
