//! The admin pages' own database pool: a few connections apart from the consumer's, each with
//! a statement timeout, so that page loads (anonymous ones included) can neither take the
//! consumer's connections nor keep PostgreSQL busy for long.

use deadpool_postgres::Pool;

use crate::config::admin::AdminSettings;
use crate::db::{Database, DbError, pool_of};

/// A pool of `settings.db_pool_size` connections whose statements end after
/// `settings.statement_timeout`; a page waits at most that long for a connection too.
pub fn pool(database: &Database, settings: &AdminSettings) -> Result<Pool, DbError> {
    let mut database = database.clone();
    let config = database.config_mut();
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
    pool_of(database, settings.db_pool_size, settings.statement_timeout)
}
