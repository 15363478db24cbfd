//! What the admin and metrics addresses serve while `run` waits for its database at start
//! (it cannot migrate, so nothing else is built yet): `/healthz` answers (the process is
//! alive and retrying), `/readyz` and every page answer 503 with the reason, `/metrics` the
//! process's metrics. Replaced by the real servers, on the same listeners, once the database
//! answered and the migrations ran.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use actix_web::http::header::ContentType;
use actix_web::{App, HttpResponse, HttpServer, web};
use chrono::{DateTime, SecondsFormat, Utc};

use super::{ADMIN_SHUTDOWN_GRACE, Servers, acceptor, security_headers, tls};
use crate::metrics::Metrics;

/// Why the service waits, as the pages show it.
#[derive(Debug, Clone)]
pub struct WaitingFor {
    /// The last failure, with its causes.
    pub reason: String,
    pub since: DateTime<Utc>,
    pub attempts: u64,
    pub last_attempt: DateTime<Utc>,
}

/// The shared, updated reason.
#[derive(Clone)]
pub struct WaitingState {
    inner: Arc<Mutex<WaitingFor>>,
    metrics: Metrics,
}

impl WaitingState {
    pub fn new(reason: String, metrics: Metrics) -> WaitingState {
        let now = Utc::now();
        WaitingState {
            inner: Arc::new(Mutex::new(WaitingFor {
                reason,
                since: now,
                attempts: 1,
                last_attempt: now,
            })),
            metrics,
        }
    }

    /// Another attempt failed with `reason`.
    pub fn failed_again(&self, reason: String) {
        let mut waiting = self.inner.lock().expect("waiting lock");
        waiting.reason = reason;
        waiting.attempts += 1;
        waiting.last_attempt = Utc::now();
    }

    pub fn now(&self) -> WaitingFor {
        self.inner.lock().expect("waiting lock").clone()
    }
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::plaintext())
        .body("ok\n")
}

async fn readyz(state: web::Data<WaitingState>) -> HttpResponse {
    let waiting = state.now();
    HttpResponse::ServiceUnavailable().json(serde_json::json!({
        "database": false,
        "group_joined": false,
        "timed_out": [],
        "waiting_for_database": {
            "reason": waiting.reason,
            "since": stamp(waiting.since),
            "attempts": waiting.attempts,
            "last_attempt": stamp(waiting.last_attempt),
        },
    }))
}

async fn metrics(state: web::Data<WaitingState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}

/// Every other path: the admin UI is not there yet; say why.
async fn page(state: web::Data<WaitingState>) -> HttpResponse {
    let waiting = state.now();
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" \
         content=\"5\"><title>history-consumer: waiting for the database</title></head><body>\
         <h1>Waiting for the database</h1><p>The service cannot reach its PostgreSQL database, \
         so it has not applied its migrations or joined the consumer group yet. It keeps \
         trying and starts as soon as the database answers.</p>\
         <p><strong>Last error:</strong> {}</p><p>Waiting since {}; {} attempts, the last at \
         {}.</p><p>Check <code>--database-url</code> / <code>HISTORY_DATABASE_URL</code>, the \
         server and the network between them.</p></body></html>",
        html_escape(&waiting.reason),
        stamp(waiting.since),
        waiting.attempts,
        stamp(waiting.last_attempt),
    );
    HttpResponse::ServiceUnavailable()
        .content_type(ContentType::html())
        .body(body)
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The waiting servers on clones of the listeners (the listeners themselves stay open for the
/// real servers, so the ports are never released in between).
pub fn server(
    admin: &TcpListener,
    metrics_listener: Option<&TcpListener>,
    state: WaitingState,
    tls: Option<&tls::AdminTls>,
) -> std::io::Result<Servers> {
    let https = tls.is_some();
    let state = web::Data::new(state);
    let mut servers = Vec::new();
    for listener in std::iter::once(admin).chain(metrics_listener) {
        let state = state.clone();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .route("/healthz", web::get().to(healthz))
                .route("/readyz", web::get().to(readyz))
                .route("/metrics", web::get().to(metrics))
                .default_service(web::to(page))
                .wrap(security_headers(https))
        })
        .workers(1)
        .shutdown_timeout(ADMIN_SHUTDOWN_GRACE.as_secs())
        .disable_signals();
        let listener = listener.try_clone()?;
        let server = match tls {
            Some(tls) => server.listen_openssl(listener, acceptor(tls)?)?,
            None => server.listen(listener)?,
        }
        .run();
        servers.push(server);
    }
    Ok(Servers {
        servers,
        state: None,
    })
}
