//! The PostgreSQL inbox repository: the SPEC §3 statements on a pooled connection.
//!
//! `begin` opens a [`Session`] (a pooled connection inside a transaction); `commit` and
//! `rollback` close it. A session that may still be inside its transaction (a failed rollback,
//! a cancelled future) never reaches the pool again: see [`Session`].

use deadpool_postgres::{Pool, PoolError};

use super::contract::{InboxRepository, Origin};
use super::session::Session;
use super::sqlstate::{ErrorClass, Step, classify};
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
    /// A statement of the inbox transaction (or its batched form) failed; `step` says which,
    /// so that an INSERT's rejection of a row is told apart from a failed COMMIT.
    #[error("{step} failed")]
    Statement {
        step: Step,
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement outside the inbox transaction (admin pages, classifying duplicates).
    #[error(transparent)]
    Db(tokio_postgres::Error),
    #[error("inbox transaction misuse: {0}")]
    Misuse(&'static str),
}

impl PgInboxError {
    /// The text the error is stored and shown with: the error and its causes, the SQLSTATE at
    /// the end of the first line (the server's DETAIL and HINT lines follow).
    pub fn text(&self) -> String {
        let text = crate::error_text::chain(self);
        let Some(state) = self.sqlstate() else {
            return text;
        };
        match text.split_once('\n') {
            Some((first, rest)) => format!("{first} (SQLSTATE {state})\n{rest}"),
            None => format!("{text} (SQLSTATE {state})"),
        }
    }

    /// Tags a statement's error with the step that ran it, for `map_err`.
    pub fn at(step: Step) -> impl FnOnce(tokio_postgres::Error) -> PgInboxError {
        move |source| PgInboxError::Statement { step, source }
    }

    /// The step that failed, for a statement of the inbox transaction.
    pub fn step(&self) -> Option<Step> {
        match self {
            PgInboxError::Statement { step, .. } => Some(*step),
            _ => None,
        }
    }

    /// The server's SQLSTATE, when it answered with an error.
    pub fn sqlstate(&self) -> Option<&str> {
        self.database_error()
            .and_then(|e| e.code())
            .map(|c| c.code())
    }

    fn database_error(&self) -> Option<&tokio_postgres::Error> {
        match self {
            PgInboxError::Statement { source, .. } | PgInboxError::Db(source) => Some(source),
            PgInboxError::Pool(_) | PgInboxError::Misuse(_) => None,
        }
    }

    /// What the error says about the rows of the work (see [`super::sqlstate`]).
    pub fn class(&self) -> ErrorClass {
        match self {
            PgInboxError::Pool(_) => ErrorClass::Unavailable,
            PgInboxError::Misuse(_) => ErrorClass::Transient,
            PgInboxError::Statement { source, .. } | PgInboxError::Db(source) => {
                if source.is_closed() {
                    return ErrorClass::Unavailable;
                }
                let db = source.as_db_error();
                classify(
                    self.step(),
                    source.code().map(|c| c.code()),
                    db.and_then(|d| d.constraint()),
                )
            }
        }
    }

    /// Whether the failure says nothing about the records: the database could not be reached,
    /// the connection broke, or the server is going away. The same work may well succeed as it
    /// is later; any other failure may be caused by the records themselves.
    pub fn is_unavailable(&self) -> bool {
        self.class() == ErrorClass::Unavailable
    }

    /// Whether an event's INSERT said that this row can never be stored (its transaction then
    /// never commits: the event is known not to be stored).
    pub fn rejects_the_row(&self) -> bool {
        self.class() == ErrorClass::RowRejected
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
        let failed = PgInboxError::at(Step::InsertMarker);
        let statement = connection.prepare_cached(TRY_INBOX).await.map_err(failed)?;
        let row = connection
            .query_opt(&statement, &[&event_id, &origin.partition, &origin.offset])
            .await
            .map_err(PgInboxError::at(Step::InsertMarker))?;
        Ok(row.is_some())
    }

    async fn save_history(&mut self, event: &TicketEvent) -> Result<(), PgInboxError> {
        let connection = self.connection()?;
        let failed = PgInboxError::at(Step::InsertHistory);
        let statement = connection
            .prepare_cached(SAVE_HISTORY)
            .await
            .map_err(failed)?;
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
            .await
            .map_err(PgInboxError::at(Step::InsertHistory))?;
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
