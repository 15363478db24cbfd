//! Who may read and act: the admin token, given once on the login form (then an HttpOnly,
//! SameSite=Strict session cookie whose forms carry a CSRF token) or on every API request as
//! `Authorization: Bearer`. Wrong tokens are throttled ([`super::throttle`]), logged and counted,
//! and so are page loads of readers who did not sign in. Without a configured token the admin is
//! read-only.

use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use actix_web::HttpRequest;
use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::header;

use super::sessions::{MAX_SESSIONS, SessionRules, Sessions};
use super::throttle::{self, Throttle, ThrottleRules};
use crate::config::Secret;
use crate::config::admin::AdminSettings;
use crate::metrics::Metrics;

/// Why a request may not read or act.
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
    #[error("too many wrong admin tokens; try again in {retry_after_secs} s")]
    Throttled { retry_after_secs: u64 },
    #[error(
        "too many page loads without signing in; try again in {retry_after_secs} s, or sign in"
    )]
    TooManyReads { retry_after_secs: u64 },
}

/// How a token was presented (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Method {
    SignIn,
    Bearer,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
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
        let peer = peer(request).map_or_else(|| "unknown".into(), |ip| ip.to_string());
        match self {
            Principal::Bearer => format!("api token from {peer}"),
            Principal::Session { id, .. } => format!("session {} from {peer}", &id[..8]),
        }
    }
}

/// The session cookie's attributes.
struct CookieRules {
    name: String,
    secure: bool,
    max_age: std::time::Duration,
}

/// The token, the signed-in sessions and the throttle (in memory: a restart signs everybody
/// out).
pub struct Auth {
    token: Option<Secret>,
    sessions: Mutex<Sessions>,
    throttle: Mutex<Throttle>,
    /// `None`: anonymous readers are not limited.
    anonymous_reads: Option<Mutex<Throttle>>,
    cookie: CookieRules,
    metrics: Metrics,
}

impl Auth {
    /// `instance` tells this instance's cookie from those of others on the same host (browsers
    /// do not separate cookies by port).
    pub fn new(settings: &AdminSettings, instance: &str, metrics: Metrics) -> Auth {
        Auth::with_throttle(settings, instance, metrics, throttle::RULES)
    }

    pub fn with_throttle(
        settings: &AdminSettings,
        instance: &str,
        metrics: Metrics,
        rules: ThrottleRules,
    ) -> Auth {
        Auth {
            token: settings.token.clone(),
            sessions: Mutex::new(Sessions::new(SessionRules {
                idle: settings.session_idle,
                max_age: settings.session_max,
                capacity: MAX_SESSIONS,
            })),
            throttle: Mutex::new(Throttle::new(rules)),
            anonymous_reads: throttle::anonymous_reads(settings.anonymous_reads_per_sec)
                .map(|rules| Mutex::new(Throttle::new(rules))),
            cookie: CookieRules {
                name: cookie_name(instance, settings.cookie_secure()),
                secure: settings.cookie_secure(),
                max_age: settings.session_max,
            },
            metrics,
        }
    }

    pub fn read_only(&self) -> bool {
        self.token.is_none()
    }

    /// Checks a token typed on the login form; on success a new session and its cookie.
    pub fn sign_in(&self, request: &HttpRequest, token: &str) -> Result<Cookie<'static>, Denied> {
        self.check_token(Method::SignIn, peer(request), token)?;
        let id = random_hex();
        self.sessions()
            .create(id.clone(), random_hex(), Instant::now());
        Ok(self.cookie(id))
    }

    /// Forgets the request's session; the cookie that clears it in the browser.
    pub fn sign_out(&self, request: &HttpRequest) -> Cookie<'static> {
        if let Some(cookie) = request.cookie(&self.cookie.name) {
            self.sessions().remove(cookie.value());
        }
        let mut cookie = self.cookie(String::new());
        cookie.make_removal();
        cookie
    }

    /// The session of a browser request, if signed in (and not ended); it counts as used.
    pub fn session(&self, request: &HttpRequest) -> Option<Principal> {
        let cookie = request.cookie(&self.cookie.name)?;
        let csrf = self.sessions().touch(cookie.value(), Instant::now())?;
        Some(Principal::Session {
            id: cookie.value().to_owned(),
            csrf,
        })
    }

    /// Who is asking to act: a bearer token or a session (whose form must carry `csrf`).
    /// Another `Authorization` scheme (Basic from a proxy, say) is not ours: the session counts.
    pub fn authorize(
        &self,
        request: &HttpRequest,
        csrf: Option<&str>,
    ) -> Result<Principal, Denied> {
        if self.read_only() {
            return Err(Denied::ReadOnly);
        }
        if let Some(given) = bearer_token(request) {
            self.check_token(Method::Bearer, peer(request), given)?;
            return Ok(Principal::Bearer);
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

    /// Who reads: a bearer token (checked), a session, or nobody in particular (`None`). A
    /// read-only instance has no token to check a bearer against: its readers are anonymous.
    pub fn reader(&self, request: &HttpRequest) -> Result<Option<Principal>, Denied> {
        match bearer_token(request) {
            Some(given) if !self.read_only() => {
                self.check_token(Method::Bearer, peer(request), given)?;
                Ok(Some(Principal::Bearer))
            }
            _ => Ok(self.session(request)),
        }
    }

    /// Counts a page load of an anonymous reader; refused past the anonymous read limit.
    pub fn admit_anonymous(&self, request: &HttpRequest) -> Result<(), Denied> {
        let Some(reads) = &self.anonymous_reads else {
            return Ok(());
        };
        let (peer, now) = (peer(request), Instant::now());
        let mut reads = reads.lock().expect("anonymous reads lock");
        if let Err(refused) = reads.check(peer, now) {
            drop(reads);
            // A flood is what this refuses: the counter has every one, the log none.
            self.metrics.observe_admin_anonymous_read_refused();
            return Err(Denied::TooManyReads {
                retry_after_secs: whole_seconds(refused.retry_after),
            });
        }
        reads.count(peer, now);
        Ok(())
    }

    /// Compares a presented token under the throttle; a wrong one is counted against `peer`.
    fn check_token(&self, method: Method, peer: Option<IpAddr>, given: &str) -> Result<(), Denied> {
        let expected = self.token.as_ref().ok_or(Denied::ReadOnly)?;
        let now = Instant::now();
        // Held across the comparison: parallel guesses cannot all pass one check.
        let mut throttle = self.throttle.lock().expect("throttle lock");
        if let Err(refused) = throttle.check(peer, now) {
            drop(throttle);
            self.refused(
                method,
                peer,
                Refusal::Throttled {
                    global: refused.global,
                },
            );
            return Err(Denied::Throttled {
                retry_after_secs: whole_seconds(refused.retry_after),
            });
        }
        if constant_time_eq(expected.expose().as_bytes(), given.as_bytes()) {
            return Ok(());
        }
        throttle.count(peer, now);
        drop(throttle);
        self.refused(method, peer, Refusal::WrongToken);
        Err(Denied::WrongToken)
    }

    /// Logs and counts a refused token.
    fn refused(&self, method: Method, peer: Option<IpAddr>, refusal: Refusal) {
        let peer = peer.map_or_else(|| "unknown".into(), |ip| ip.to_string());
        match refusal {
            Refusal::WrongToken => {
                tracing::warn!(method = method.as_str(), %peer, "admin token refused");
                self.metrics
                    .observe_admin_auth_failure(method.as_str(), "wrong_token");
            }
            Refusal::Throttled { global } => {
                // Every refused attempt is counted; logging each would let a flood fill the log.
                let method = method.as_str();
                tracing::debug!(method, %peer, global, "admin token attempt throttled");
                self.metrics.observe_admin_auth_failure(method, "throttled");
            }
        }
    }

    fn cookie(&self, value: String) -> Cookie<'static> {
        let max_age = actix_web::cookie::time::Duration::seconds(
            i64::try_from(self.cookie.max_age.as_secs()).unwrap_or(i64::MAX),
        );
        Cookie::build(self.cookie.name.clone(), value)
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(self.cookie.secure)
            .max_age(max_age)
            .finish()
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().expect("sessions lock")
    }
}

#[derive(Debug, Clone, Copy)]
enum Refusal {
    WrongToken,
    Throttled { global: bool },
}

/// The credentials of `Authorization: Bearer <token>` (the scheme in any case), if sent.
pub fn bearer_token(request: &HttpRequest) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, credentials) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim())
}

/// A `Retry-After` value: whole seconds, at least one.
fn whole_seconds(wait: std::time::Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

fn peer(request: &HttpRequest) -> Option<IpAddr> {
    request.peer_addr().map(|addr| addr.ip())
}

/// `history_session_<8 hex digits of the instance>`, with the `__Host-` prefix when `Secure`
/// (the browser then refuses it over plain HTTP and from other hosts).
fn cookie_name(instance: &str, secure: bool) -> String {
    // FNV-1a: stable across restarts and builds, unlike the standard library's hasher.
    let hash = instance.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let prefix = if secure { "__Host-" } else { "" };
    format!("{prefix}history_session_{:08x}", hash as u32)
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
    use std::time::Duration;

    use super::*;
    use actix_web::test::TestRequest;

    const TOKEN: &str = "s3cret-token-0123";

    fn auth(token: Option<&str>) -> Auth {
        let settings = AdminSettings {
            token: token.map(Secret::from),
            ..AdminSettings::default()
        };
        Auth::new(&settings, "host:8080", Metrics::new())
    }

    fn with_cookie(cookie: Cookie<'static>) -> HttpRequest {
        TestRequest::default().cookie(cookie).to_http_request()
    }

    #[test]
    fn without_a_token_nothing_may_act() {
        let auth = auth(None);
        let request = TestRequest::default()
            .insert_header(("Authorization", "Bearer anything"))
            .to_http_request();
        assert_eq!(auth.authorize(&request, None), Err(Denied::ReadOnly));
        assert_eq!(
            auth.sign_in(&request, "anything").unwrap_err(),
            Denied::ReadOnly
        );
    }

    #[test]
    fn a_bearer_token_must_match() {
        let auth = auth(Some(TOKEN));
        let good = TestRequest::default()
            .insert_header(("Authorization", format!("Bearer {TOKEN}")))
            .to_http_request();
        assert_eq!(auth.authorize(&good, None), Ok(Principal::Bearer));
        let lower = TestRequest::default()
            .insert_header(("Authorization", format!("bearer {TOKEN}")))
            .to_http_request();
        assert_eq!(auth.authorize(&lower, None), Ok(Principal::Bearer));
        let bad = TestRequest::default()
            .insert_header(("Authorization", "Bearer s3cret-token-0124"))
            .to_http_request();
        assert_eq!(auth.authorize(&bad, None), Err(Denied::WrongToken));
    }

    #[test]
    fn a_session_must_echo_its_csrf_token() {
        let auth = auth(Some(TOKEN));
        let anonymous = TestRequest::default().to_http_request();
        let cookie = auth.sign_in(&anonymous, TOKEN).unwrap();
        assert!(cookie.http_only().unwrap_or(false));
        assert_eq!(cookie.same_site(), Some(SameSite::Strict));
        let request = with_cookie(cookie);
        let Some(Principal::Session { csrf, .. }) = auth.session(&request) else {
            panic!("signed in");
        };
        assert_eq!(auth.authorize(&request, None), Err(Denied::Csrf));
        assert_eq!(auth.authorize(&request, Some("forged")), Err(Denied::Csrf));
        assert!(auth.authorize(&request, Some(&csrf)).is_ok());
        assert_eq!(
            auth.authorize(&anonymous, Some(&csrf)),
            Err(Denied::NotSignedIn)
        );
    }

    #[test]
    fn another_authorization_scheme_leaves_the_session_in_charge() {
        let auth = auth(Some(TOKEN));
        let cookie = auth
            .sign_in(&TestRequest::default().to_http_request(), TOKEN)
            .unwrap();
        let request = TestRequest::default()
            .cookie(cookie)
            .insert_header(("Authorization", "Basic b3BlcmF0b3I6cHJveHk="))
            .to_http_request();
        let Some(Principal::Session { csrf, .. }) = auth.session(&request) else {
            panic!("signed in");
        };
        assert!(matches!(
            auth.authorize(&request, Some(&csrf)),
            Ok(Principal::Session { .. })
        ));
        assert!(matches!(
            auth.reader(&request),
            Ok(Some(Principal::Session { .. }))
        ));
    }

    #[test]
    fn wrong_tokens_are_throttled_and_counted() {
        let auth = auth(Some(TOKEN));
        let request = TestRequest::default()
            .peer_addr("10.1.2.3:5555".parse().unwrap())
            .to_http_request();
        for _ in 0..throttle::RULES.per_address.burst {
            assert_eq!(
                auth.sign_in(&request, "wrong-token-0123456").unwrap_err(),
                Denied::WrongToken
            );
        }
        assert!(matches!(
            auth.sign_in(&request, TOKEN),
            Err(Denied::Throttled { .. })
        ));
        let exposition = auth.metrics.render();
        assert!(
            exposition.contains(
                "history_admin_auth_failures_total{method=\"sign_in\",reason=\"wrong_token\"} 5"
            ),
            "{exposition}"
        );
        assert!(exposition.contains(
            "history_admin_auth_failures_total{method=\"sign_in\",reason=\"throttled\"} 1"
        ));
    }

    #[test]
    fn an_ended_session_signs_out() {
        let settings = AdminSettings {
            token: Some(TOKEN.into()),
            session_idle: Duration::from_millis(1),
            session_max: Duration::from_millis(1),
            ..AdminSettings::default()
        };
        let auth = Auth::new(&settings, "host:8080", Metrics::new());
        let cookie = auth
            .sign_in(&TestRequest::default().to_http_request(), TOKEN)
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(auth.session(&with_cookie(cookie)), None);
        assert!(auth.sessions().is_empty());
    }

    #[test]
    fn cookie_names_differ_per_instance_and_secure_ones_are_host_only() {
        let a = cookie_name("history-1:8080", false);
        assert!(a.starts_with("history_session_"), "{a}");
        assert_eq!(a, cookie_name("history-1:8080", false), "stable");
        assert_ne!(a, cookie_name("history-2:8080", false));
        assert_ne!(a, cookie_name("history-1:8081", false));
        assert!(cookie_name("history-1:8080", true).starts_with("__Host-history_session_"));
    }
}
