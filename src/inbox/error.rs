//! The inbox's error: which statement failed and what that says about the rows.

use deadpool_postgres::PoolError;

use super::sqlstate::{ErrorClass, Step, classify};

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
