//! The PostgreSQL inbox repository: the SPEC §3 statements on a pooled connection.
//!
//! `begin` opens a [`Session`] (a pooled connection inside a transaction); `commit` and
//! `rollback` close it. A session that may still be inside its transaction (a failed rollback,
//! a cancelled future) never reaches the pool again: see [`Session`].

use deadpool_postgres::{Pool, PoolError};

use super::contract::{InboxRepository, Origin};
use super::session::Session;
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
    #[error("no database connection")]
    Pool(#[source] PoolError),
    #[error(transparent)]
    Db(tokio_postgres::Error),
    #[error("inbox transaction misuse: {0}")]
    Misuse(&'static str),
}

impl PgInboxError {
    /// Whether the failure says nothing about the records: the database could not be reached,
    /// the connection broke, or the server is going away. The same work may well succeed as it
    /// is later; any other failure may be caused by the records themselves.
    pub fn is_unavailable(&self) -> bool {
        match self {
            PgInboxError::Pool(_) => true,
            PgInboxError::Db(error) => is_unavailable(error),
            PgInboxError::Misuse(_) => false,
        }
    }
}

/// SQLSTATEs of a server that cannot serve anyone right now.
const UNAVAILABLE_STATES: [&str; 4] = [
    "57P01", // admin_shutdown
    "57P02", // crash_shutdown
    "57P03", // cannot_connect_now
    "53300", // too_many_connections
];

fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // Class 08: connection exception.
        Some(state) => state.code().starts_with("08") || UNAVAILABLE_STATES.contains(&state.code()),
        // No SQLSTATE: the connection failed (I/O, protocol), not a statement.
        None => true,
    }
}

impl From<tokio_postgres::Error> for PgInboxError {
    fn from(error: tokio_postgres::Error) -> Self {
        PgInboxError::Db(error)
    }
}

/// The inbox repository over a deadpool-postgres pool. One value runs one transaction at a time.
pub struct PgInbox {
    pool: Pool,
    open: Option<Session>,
}

impl PgInbox {
    pub fn new(pool: Pool) -> Self {
        PgInbox { pool, open: None }
    }

    fn connection(&self) -> Result<&deadpool_postgres::Object, PgInboxError> {
        self.open
            .as_ref()
            .map(Session::client)
            .ok_or(PgInboxError::Misuse("no transaction is open"))
    }
}

impl InboxRepository for PgInbox {
    type Error = PgInboxError;

    async fn begin(&mut self) -> Result<(), PgInboxError> {
        if self.open.is_some() {
            return Err(PgInboxError::Misuse("a transaction is already open"));
        }
        self.open = Some(Session::begin(&self.pool).await?);
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
        let session = self
            .open
            .as_mut()
            .ok_or(PgInboxError::Misuse("no transaction is open"))?;
        session.commit().await?;
        self.open = None;
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), PgInboxError> {
        self.open
            .take()
            .ok_or(PgInboxError::Misuse("no transaction is open"))?
            .rollback()
            .await
    }
}
