//! Applies the versioned SQL files in `migrations/` (embedded at build time) to a database.
//!
//! Applied versions are recorded in `refinery_schema_history`, so a second run is a no-op. An
//! advisory lock serialises instances that start at the same moment.

use deadpool_postgres::Pool;
use tokio_postgres::Client;

refinery::embed_migrations!("migrations");

/// Any `pg_advisory_lock` key unique to this application.
const MIGRATION_LOCK_KEY: i64 = 0x0048_4953_544F_5259; // "HISTORY"

/// A migration could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("no database connection to migrate")]
    Connect(#[source] deadpool_postgres::PoolError),
    #[error("could not take the migration lock")]
    Lock(#[source] tokio_postgres::Error),
    /// The message is the failing statement's error, as refinery reports it.
    #[error("migration file migrations/{file} failed: {message}")]
    File { file: String, message: String },
    #[error("migrations failed")]
    Runner(#[source] refinery::Error),
}

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Names of the files applied by this run, in order (empty when already up to date).
    pub applied: Vec<String>,
}

/// Applies pending migrations through one connection of `pool`.
pub async fn migrate_pool(pool: &Pool) -> Result<MigrationReport, MigrateError> {
    let mut connection = pool.get().await.map_err(MigrateError::Connect)?;
    // refinery migrates a bare tokio-postgres client.
    let client: &mut Client = &mut connection;
    migrate(client).await
}

/// Applies every pending migration on `client`, holding an advisory lock meanwhile.
pub async fn migrate(client: &mut Client) -> Result<MigrationReport, MigrateError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await
        .map_err(MigrateError::Lock)?;
    let result = migrations::runner().run_async(client).await;
    // The lock is released with the session anyway; an error here changes nothing.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .await;
    match result {
        Ok(report) => Ok(MigrationReport {
            applied: report
                .applied_migrations()
                .iter()
                .map(|m| format!("{m}.sql"))
                .collect(),
        }),
        Err(error) => Err(describe(error)),
    }
}

/// Names the failing file, taken from refinery's "error applying migration V…" context.
fn describe(error: refinery::Error) -> MigrateError {
    if let refinery::error::Kind::Connection(context, cause) = error.kind() {
        if let Some(name) = context.strip_prefix("error applying migration ") {
            return MigrateError::File {
                file: format!("{name}.sql"),
                message: crate::error_text::chain(cause.as_ref()),
            };
        }
    }
    MigrateError::Runner(error)
}
