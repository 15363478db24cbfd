//! A pooled connection inside a transaction: the one way this crate opens a transaction.
//!
//! The connection goes back to the pool only once its transaction is closed for sure (a
//! confirmed COMMIT or ROLLBACK). Dropped at any other moment — its future cancelled by a work
//! timeout or a drain deadline while BEGIN, a statement or COMMIT was in flight, or after a
//! failed ROLLBACK — the session is detached from the pool and closed instead: the server may
//! have opened the transaction, and the next user of a pooled session inside it would see its
//! uncommitted inbox marker as "already applied", then lose the event with its rollback.

use deadpool_postgres::{Object, Pool};

use super::PgInboxError;
use super::sqlstate::Step;

/// A connection that may be inside a transaction.
pub struct Session(Option<Object>);

impl Session {
    /// Takes a connection from the pool and opens a transaction on it.
    pub async fn begin(pool: &Pool) -> Result<Session, PgInboxError> {
        let session = Session::take(pool).await?;
        session.send_begin().await?;
        Ok(session)
    }

    /// Takes a connection from the pool for a transaction whose BEGIN the caller sends
    /// ([`Session::send_begin`]), ahead of its statements without waiting for its reply. From
    /// here on the session counts as open: dropped, it is detached.
    pub async fn take(pool: &Pool) -> Result<Session, PgInboxError> {
        let connection = pool.get().await.map_err(PgInboxError::Pool)?;
        Ok(Session(Some(connection)))
    }

    /// Sends BEGIN on the connection and waits for its reply. Sent before it first waits, like
    /// every statement (see `inbox::batch`).
    pub async fn send_begin(&self) -> Result<(), PgInboxError> {
        self.client()
            .batch_execute("BEGIN")
            .await
            .map_err(PgInboxError::at(Step::Begin))
    }

    /// The connection, for statements inside the transaction.
    pub fn client(&self) -> &Object {
        self.0
            .as_ref()
            .expect("a session is open until commit or rollback consumes it")
    }

    /// Commits. On success the connection returns to the pool; on error the transaction may
    /// still be open and the session stays with the caller (for its rollback, or its drop).
    pub async fn commit(&mut self) -> Result<(), PgInboxError> {
        self.send_commit().await?;
        self.committed();
        Ok(())
    }

    /// Sends COMMIT on the connection, behind whatever was sent before it, and waits for its
    /// reply; the session stays open until [`Session::committed`] says it succeeded (a COMMIT
    /// that follows a failed statement rolls back: only the caller knows which it was).
    pub async fn send_commit(&self) -> Result<(), PgInboxError> {
        self.client()
            .batch_execute("COMMIT")
            .await
            .map_err(PgInboxError::at(Step::Commit))
    }

    /// The transaction is committed: the connection returns to the pool.
    pub fn committed(&mut self) {
        self.0 = None;
    }

    /// Rolls back. On success the connection returns to the pool; on error it is detached.
    pub async fn rollback(mut self) -> Result<(), PgInboxError> {
        self.client()
            .batch_execute("ROLLBACK")
            .await
            .map_err(PgInboxError::at(Step::Rollback))?;
        self.0 = None;
        Ok(())
    }

    /// Whether the session still holds its connection (a transaction may be open).
    pub fn is_open(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(connection) = self.0.take() {
            // Closing the detached client ends the server session, which rolls back.
            drop(Object::take(connection));
        }
    }
}
