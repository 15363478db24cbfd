//! The admin HTTP server: health endpoints, the JSON status API and the Prometheus exporter.

mod routes;

use std::net::TcpListener;

use actix::Addr;
use actix_web::{App, HttpServer, web};
use deadpool_postgres::Pool;

use crate::actors::Supervisor;
use crate::metrics::Metrics;

/// What the handlers share.
#[derive(Clone)]
pub struct AdminState {
    pub supervisor: Addr<Supervisor>,
    pub pool: Pool,
    pub metrics: Metrics,
    pub admin_token: Option<String>,
}

/// Builds the server on an already bound listener (port 0 works for tests).
pub fn server(listener: TcpListener, state: AdminState) -> std::io::Result<actix_web::dev::Server> {
    let state = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .configure(routes::configure)
    })
    .workers(1)
    // Signals belong to the application: it leaves the Kafka group before stopping.
    .disable_signals()
    .listen(listener)?
    .run();
    Ok(server)
}
