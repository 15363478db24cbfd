//! The PostgreSQL inbox repository: the SPEC §3 statements on a pooled connection.
//!
//! `begin` takes a connection from the pool and opens a transaction on it; `commit` and
//! `rollback` close the transaction and give the connection back. A connection whose rollback
//! failed is in an unknown state and is detached from the pool instead of being reused.

use deadpool_postgres::{Object, Pool, PoolError};

use super::contract::{InboxRepository, Origin};
use crate::domain::TicketEvent;

/// SPEC §3 step 1, plus where the marker was first seen (migration V2).
const TRY_INBOX: &str = "INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) \
     VALUES ($1, $2, $3, now()) \
     ON CONFLICT (event_id) DO NOTHING \
     RETURNING event_id";

/// SPEC §3 step 2.
const SAVE_HISTORY: &str = "INSERT INTO history_events \
     (event_id, ticket_id, from_status, to_status, changed_at) \
     VALUES ($1, $2, $3, $4, $5)";

/// An inbox operation failed; the outcome of the transaction is unknown.
#[derive(Debug, thiserror::Error)]
pub enum PgInboxError {
    // Both render their whole cause chain in Display (and so have no `source`): the causes are
    // what an operator needs to see, and tokio-postgres alone says only "db error".
    #[error("no database connection: {}", crate::error_text::chain(.0))]
    Pool(PoolError),
    #[error("{}", crate::error_text::chain(.0))]
    Db(tokio_postgres::Error),
    #[error("inbox transaction misuse: {0}")]
    Misuse(&'static str),
}

impl From<tokio_postgres::Error> for PgInboxError {
    fn from(error: tokio_postgres::Error) -> Self {
        PgInboxError::Db(error)
    }
}

/// The inbox repository over a deadpool-postgres pool. One value runs one transaction at a time.
pub struct PgInbox {
    pool: Pool,
    open: Option<Object>,
}

impl PgInbox {
    pub fn new(pool: Pool) -> Self {
        PgInbox { pool, open: None }
    }

    fn connection(&self) -> Result<&Object, PgInboxError> {
        self.open
            .as_ref()
            .ok_or(PgInboxError::Misuse("no transaction is open"))
    }
}

impl Drop for PgInbox {
    fn drop(&mut self) {
        // Dropped with a transaction open (its future was cancelled: a drain deadline, a
        // timeout): the session must never reach the pool, or the next user would run inside
        // this stale transaction and could see its uncommitted marker as "already applied".
        if let Some(connection) = self.open.take() {
            drop(Object::take(connection));
        }
    }
}

impl InboxRepository for PgInbox {
    type Error = PgInboxError;

    async fn begin(&mut self) -> Result<(), PgInboxError> {
        if self.open.is_some() {
            return Err(PgInboxError::Misuse("a transaction is already open"));
        }
        let connection = self.pool.get().await.map_err(PgInboxError::Pool)?;
        connection.batch_execute("BEGIN").await?;
        self.open = Some(connection);
        Ok(())
    }

    async fn try_inbox(&mut self, event_id: &str, origin: Origin) -> Result<bool, PgInboxError> {
        let connection = self.connection()?;
        let statement = connection.prepare_cached(TRY_INBOX).await?;
        let row = connection
            .query_opt(&statement, &[&event_id, &origin.partition, &origin.offset])
            .await?;
        Ok(row.is_some())
    }

    async fn save_history(&mut self, event: &TicketEvent) -> Result<(), PgInboxError> {
        let connection = self.connection()?;
        let statement = connection.prepare_cached(SAVE_HISTORY).await?;
        connection
            .execute(
                &statement,
                &[
                    &event.event_id,
                    &event.ticket_id,
                    &event.from_status,
                    &event.to_status,
                    &event.changed_at,
                ],
            )
            .await?;
        Ok(())
    }

    async fn commit(&mut self) -> Result<(), PgInboxError> {
        let connection = self.connection()?;
        connection.batch_execute("COMMIT").await?;
        // Back to the pool only once the transaction is closed for sure.
        self.open = None;
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), PgInboxError> {
        let connection = self
            .open
            .take()
            .ok_or(PgInboxError::Misuse("no transaction is open"))?;
        match connection.batch_execute("ROLLBACK").await {
            Ok(()) => Ok(()),
            Err(error) => {
                // The session may still be inside a transaction: never hand it to anyone else.
                drop(Object::take(connection));
                Err(error.into())
            }
        }
    }
}
