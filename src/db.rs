//! Connection pools to the service's own PostgreSQL database.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

/// The database could not be reached or prepared.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database URL is invalid")]
    InvalidUrl(#[source] tokio_postgres::Error),
    #[error("could not build the connection pool: {0}")]
    Pool(String),
}

/// Parses a `postgres://` URL (or key=value string) into a client configuration, with a connect
/// timeout and keepalives so that a vanished server is noticed.
pub fn client_config(url: &str) -> Result<tokio_postgres::Config, DbError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(DbError::InvalidUrl)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    if config.get_application_name().is_none() {
        config.application_name("history-consumer");
    }
    config
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30));
    Ok(config)
}

/// A pool of at most `size` connections.
pub fn pool(url: &str, size: usize) -> Result<Pool, DbError> {
    pool_of(client_config(url)?, size, Duration::from_secs(10))
}

/// A pool of at most `size` connections made with `config`; a checkout waits at most `wait`.
pub fn pool_of(
    config: tokio_postgres::Config,
    size: usize,
    wait: Duration,
) -> Result<Pool, DbError> {
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            // A closed connection (server restarted) is noticed and replaced on checkout.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| DbError::Pool(e.to_string()))
}
