//! The admin HTTP server: the operator's pages, the JSON API mirroring them, operator actions,
//! `/metrics`, and the health endpoints.
//!
//! Layout: [`routes`] (handlers), [`pages`] (view models and templates), [`queries`] (database
//! reads and the audit trail), [`auth`] (token, sessions, CSRF), [`sparkline`] (trend SVG).

pub mod auth;
pub mod pages;
pub mod queries;
mod routes;
pub mod sparkline;

use std::net::TcpListener;

use actix::Addr;
use actix_web::{App, HttpServer, web};
use deadpool_postgres::Pool;

use crate::actors::{Monitor, Supervisor};
use crate::metrics::Metrics;

/// What the handlers share.
pub struct AdminState {
    pub supervisor: Addr<Supervisor>,
    pub monitor: Addr<Monitor>,
    pub pool: Pool,
    pub metrics: Metrics,
    pub auth: auth::Auth,
}

/// Builds the server on an already bound listener (port 0 works for tests).
pub fn server(listener: TcpListener, state: AdminState) -> std::io::Result<actix_web::dev::Server> {
    let state = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(web::FormConfig::default().limit(16 * 1024))
            .configure(routes::configure)
    })
    .workers(1)
    // Signals belong to the application: it leaves the Kafka group before stopping.
    .disable_signals()
    .listen(listener)?
    .run();
    Ok(server)
}
