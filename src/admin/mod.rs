//! The admin HTTP servers: the operator's pages, the JSON API mirroring them and operator
//! actions on the admin listener; `/metrics` and the health endpoints on it too, or on a
//! listener of their own (`--metrics-addr`) so that the admin UI can stay private while
//! Prometheus scrapes. Every response carries the security headers of [`CSP`] and its siblings.
//! Page loads cannot starve record processing: the pages have their own database pool, the
//! admin worker runs at a lower priority ([`ADMIN_WORKER_NICE`]), and refusals over a limit are
//! sent late ([`OVER_LIMIT_DELAY`]).
//!
//! Layout: [`routes`] (handlers and the read gate), [`pages`]
//! (view models and templates), [`queries`] (database reads and the audit trail) over [`pool`]
//! (the admin's own connections), [`auth`] (token, CSRF) with [`sessions`] and [`throttle`],
//! [`error`] (why a request failed, as JSON or as a page),
//! [`redirect`] (where a sign-in may lead), [`sparkline`] (trend SVG), [`rewind`] (the live
//! rewind: its confirmation, execution and page), [`tls`] (HTTPS on both listeners), [`wording`] (what a partition's state is called).

pub mod auth;
pub mod error;
pub mod pages;
pub mod pool;
pub mod queries;
pub mod redirect;
pub mod rewind;
mod routes;
pub mod sessions;
pub mod sparkline;
pub mod throttle;
pub mod tls;
pub mod waiting;
pub mod wording;

use std::net::TcpListener;
use std::sync::Arc;

use actix::Addr;
use actix_web::dev::{Server, ServerHandle};
use actix_web::http::header;
use actix_web::middleware::{DefaultHeaders, from_fn};
use actix_web::{App, HttpServer, web};
use deadpool_postgres::Pool;

use crate::actors::{Monitor, Supervisor};
use crate::domain::ConnectionHealth;
use crate::group::GroupMember;
use crate::kafka::reader::ReaderConfig;
use crate::metrics::Metrics;

/// No inline script or style, nothing from elsewhere, no framing by any page (SameSite cookies
/// do not stop a page on another port of the same host from framing the UI).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                       base-uri 'none'";

/// What the handlers share.
pub struct AdminState {
    pub supervisor: Addr<Supervisor>,
    pub monitor: Addr<Monitor>,
    /// The Kafka connection's health, read by `/readyz` without asking any actor.
    pub connection: Arc<ConnectionHealth>,
    /// The consumer's pool: `/readyz` asks whether the consumer reaches its database, and an
    /// action's audit line is written even while the pages keep their own pool busy.
    pub pool: Pool,
    /// The pages' own pool (see [`pool`]).
    pub pages_pool: Pool,
    pub metrics: Metrics,
    pub auth: auth::Auth,
    /// Reading needs a sign-in too (`--admin-read-auth`).
    pub read_auth: bool,
    /// The consumed topic: dead letters are replayed from it unless told otherwise.
    pub topic: String,
    /// A replayed dead letter is parsed with the consumer's payload limit.
    pub max_payload_bytes: usize,
    /// Where the topic is, for the live rewind's lookups (a throwaway reader, never the
    /// group member).
    pub reader: ReaderConfig,
    /// This member of the consumer group: its heartbeat runs while the servers do.
    pub group: GroupMember,
}

/// How long a refusal for going over a limit (wrong tokens, anonymous page loads) waits before
/// it is sent, so that a client ignoring `Retry-After` cannot turn the cheap refusals themselves
/// into a flood: the wait holds a timer, not a thread.
pub const OVER_LIMIT_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

/// How long the admin servers wait for open connections once the service stops: enough for a
/// page's queries (each ends within --admin-statement-timeout), and short, because a browser's
/// idle HTTP/2 connection (HTTPS negotiates it) is waited for until this runs out — actix's
/// default of 30 s held every stop with an admin tab open.
pub const ADMIN_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The scheduling priority (nice) of the admin server's worker: page loads, anonymous floods
/// included, yield the CPU to record processing when both want it.
pub const ADMIN_WORKER_NICE: i32 = 10;

/// Sets the calling thread's nice value (Linux, where nice is per thread; elsewhere nothing).
/// Raising it needs no privilege; lowering it again does.
pub fn renice_this_thread(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no preconditions; setpriority only reads its arguments and changes
    // this thread's nice value.
    unsafe {
        let thread = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// Headers on every response of both listeners (a handler's own `Cache-Control` wins), and
/// `Strict-Transport-Security` on those sent over HTTPS.
fn security_headers(https: bool) -> DefaultHeaders {
    let headers = DefaultHeaders::new()
        .add((header::CONTENT_SECURITY_POLICY, CSP))
        .add((header::X_FRAME_OPTIONS, "DENY"))
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::REFERRER_POLICY, "no-referrer"))
        // Pages carry CSRF tokens, payloads and peer addresses.
        .add((header::CACHE_CONTROL, "no-store"))
        .add(("cross-origin-opener-policy", "same-origin"))
        .add(("cross-origin-resource-policy", "same-origin"));
    if https {
        headers.add((header::STRICT_TRANSPORT_SECURITY, tls::HSTS))
    } else {
        headers
    }
}

/// A fresh acceptor for one listener; the files were checked as the service started.
fn acceptor(tls: &tls::AdminTls) -> std::io::Result<openssl::ssl::SslAcceptorBuilder> {
    tls.acceptor().map_err(std::io::Error::other)
}

/// The admin server and, with `--metrics-addr`, the metrics server.
pub struct Servers {
    servers: Vec<Server>,
    /// `None` for the pages served while `run` waits for its database: no member yet.
    state: Option<web::Data<AdminState>>,
}

/// Stops what [`Servers::spawn`] started.
pub struct ServersHandle {
    handles: Vec<ServerHandle>,
    state: Option<web::Data<AdminState>>,
}

impl Servers {
    /// Runs the servers on the current actix system, and this member's part in the group
    /// (its heartbeat).
    pub fn spawn(self) -> ServersHandle {
        let handles = self.servers.iter().map(Server::handle).collect();
        for server in self.servers {
            actix::spawn(server);
        }
        if let Some(state) = &self.state {
            state.group.start(state.monitor.clone());
            state
                .group
                .spawn(routes::serve_routed_commands(state.clone()));
        }
        ServersHandle {
            handles,
            state: self.state,
        }
    }
}

impl ServersHandle {
    /// Stops the servers and the member's part in the group (recording that it left).
    pub async fn stop(&self, graceful: bool) {
        if let Some(state) = &self.state {
            state.group.stop().await;
        }
        for handle in &self.handles {
            handle.stop(graceful).await;
        }
    }
}

/// Builds the servers on already bound listeners (port 0 works for tests): the admin UI on
/// `admin`, `/metrics` and the health endpoints on `metrics`, or on `admin` when there is none;
/// both over HTTPS with `tls`.
pub fn server(
    admin: TcpListener,
    metrics: Option<TcpListener>,
    state: AdminState,
    tls: Option<&tls::AdminTls>,
) -> std::io::Result<Servers> {
    let https = tls.is_some();
    let state = web::Data::new(state);
    let kept = state.clone();
    let shared = metrics.is_none();
    let admin_state = state.clone();
    let admin_server = HttpServer::new(move || {
        // Runs on the worker's own thread, once as it starts.
        renice_this_thread(ADMIN_WORKER_NICE);
        App::new()
            .app_data(admin_state.clone())
            .app_data(web::FormConfig::default().limit(16 * 1024))
            .configure(|config| {
                if shared {
                    routes::configure_metrics(config);
                }
                routes::configure_admin(config);
            })
            .wrap(from_fn(routes::read_gate))
            .wrap(security_headers(https))
    })
    .workers(1)
    .shutdown_timeout(ADMIN_SHUTDOWN_GRACE.as_secs())
    // Signals belong to the application: it leaves the Kafka group before stopping.
    .disable_signals();
    let admin_server = match tls {
        Some(tls) => admin_server.listen_openssl(admin, acceptor(tls)?)?,
        None => admin_server.listen(admin)?,
    }
    .run();
    let mut servers = vec![admin_server];
    if let Some(listener) = metrics {
        let metrics_server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .configure(routes::configure_metrics)
                .wrap(security_headers(https))
        })
        .workers(1)
        .shutdown_timeout(ADMIN_SHUTDOWN_GRACE.as_secs())
        .disable_signals();
        let metrics_server = match tls {
            Some(tls) => metrics_server.listen_openssl(listener, acceptor(tls)?)?,
            None => metrics_server.listen(listener)?,
        }
        .run();
        servers.push(metrics_server);
    }
    Ok(Servers {
        servers,
        state: Some(kept),
    })
}
