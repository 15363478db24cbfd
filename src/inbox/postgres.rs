//! The PostgreSQL inbox repository: the SPEC §3 statements on a pooled connection.
//!
//! `begin` opens a [`Session`] (a pooled connection inside a transaction); `commit` and
//! `rollback` close it. A session that may still be inside its transaction (a failed rollback,
//! a cancelled future) never reaches the pool again: see [`Session`].

use deadpool_postgres::Pool;

use super::contract::{InboxRepository, Origin};
use super::session::Session;
use super::sqlstate::Step;
use super::statements::TRY_INBOX;
use super::text_values::TextArrayBytes;
use super::{MarkersHeld, PgInboxError};
use crate::domain::TicketEvent;

/// The inbox repository over a deadpool-postgres pool. One value runs one transaction at a time.
pub struct PgInbox {
    pool: Pool,
    open: Option<Session>,
    held: MarkersHeld,
}

impl PgInbox {
    pub fn new(pool: Pool) -> Self {
        PgInbox::telling(pool, MarkersHeld::default())
    }

    /// One that says `held` when its first marker insert returned.
    pub fn telling(pool: Pool, held: MarkersHeld) -> Self {
        PgInbox {
            pool,
            open: None,
            held,
        }
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
        // The batch's statement with arrays of one: the same SQL for one event and for many.
        let (ids, partitions, offsets) = ([event_id], [origin.partition], [origin.offset]);
        let row = connection
            .query_one(
                &statement,
                &[&ids.as_slice(), &partitions.as_slice(), &offsets.as_slice()],
            )
            .await;
        self.held.say();
        let row = row.map_err(PgInboxError::at(Step::InsertMarker))?;
        let inserted: Option<TextArrayBytes> = row
            .try_get(0)
            .map_err(PgInboxError::at(Step::InsertMarker))?;
        Ok(inserted.is_some_and(|ids| ids.iter().any(|id| id == event_id.as_bytes())))
    }

    async fn save_history(&mut self, event: &TicketEvent) -> Result<(), PgInboxError> {
        super::batch::save_history(self.connection()?, &[event]).await
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
