//! The demo's PostgreSQL: a throwaway cluster (or the database `--database-url` names), and the
//! two questions the demo asks it: one ticket's history, and how many of its events are stored.

use std::path::Path;

use deadpool_postgres::Pool;

use super::DemoError;
use crate::config::database::DatabaseSettings;
use crate::tools::pg_cluster::{ClusterOptions, TempCluster};

/// The database the demo's consumer writes to.
pub struct Database {
    pub settings: DatabaseSettings,
    /// The throwaway cluster, when the demo owns one (dropping it removes its data).
    pub cluster: Option<TempCluster>,
}

impl Database {
    /// Uses `url` (with the password in `password_file`, if named), or starts a throwaway
    /// cluster with a `history` database.
    pub async fn prepare(
        url: Option<String>,
        password_file: Option<&Path>,
    ) -> Result<Database, DemoError> {
        if let Some(url) = url {
            let settings = DatabaseSettings::from_flags(url.into(), password_file)
                .map_err(|e| DemoError::Startup(e.into()))?;
            settings
                .validate()
                .map_err(|e| DemoError::Startup(e.into()))?;
            return Ok(Database {
                settings,
                cluster: None,
            });
        }
        // initdb and waiting for the server take seconds: keep them off the actix thread.
        let cluster = tokio::task::spawn_blocking(|| TempCluster::start(ClusterOptions::default()))
            .await
            .map_err(DemoError::Task)??;
        let url = cluster
            .create_database("history")
            .await
            .map_err(DemoError::Query)?;
        Ok(Database {
            settings: url.into(),
            cluster: Some(cluster),
        })
    }
}

const COUNT_ROWS: &str = "SELECT count(*) FROM history_events \
     WHERE starts_with(event_id, $1) OR event_id = ANY($2)";

/// Rows of the events whose id starts with `prefix` or is one of `ids` (a database given with
/// `--database-url` may hold rows of earlier runs; they do not count).
pub async fn count_rows(pool: &Pool, prefix: Option<&str>, ids: &[&str]) -> Result<i64, DemoError> {
    let client = pool.get().await.map_err(DemoError::Pool)?;
    let statement = client
        .prepare_cached(COUNT_ROWS)
        .await
        .map_err(DemoError::Query)?;
    let ids: Vec<&str> = ids.to_vec();
    let row = client
        .query_one(&statement, &[&prefix, &ids])
        .await
        .map_err(DemoError::Query)?;
    Ok(row.get(0))
}
