//! The admin pages' own database pool: a few connections apart from the consumer's, each with
//! a statement timeout, so that page loads (anonymous ones included) can neither take the
//! consumer's connections nor keep PostgreSQL busy for long.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::config::admin::AdminSettings;
use crate::db::{DbError, client_config};

/// A pool of `settings.db_pool_size` connections whose statements end after
/// `settings.statement_timeout`; a page waits at most that long for a connection too.
pub fn pool(database_url: &str, settings: &AdminSettings) -> Result<Pool, DbError> {
    let mut config = client_config(database_url)?;
    let timeout_ms = settings.statement_timeout.as_millis();
    let options = match config.get_options() {
        Some(given) => format!("{given} -c statement_timeout={timeout_ms}"),
        None => format!("-c statement_timeout={timeout_ms}"),
    };
    config.options(&options);
    // Told apart from the consumer's connections in pg_stat_activity.
    let name = format!(
        "{}-admin",
        config.get_application_name().unwrap_or("history-consumer")
    );
    config.application_name(&name);
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(settings.db_pool_size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(settings.statement_timeout))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| DbError::Pool(e.to_string()))
}
