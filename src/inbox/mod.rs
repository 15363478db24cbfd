//! The transactional inbox: the SPEC §4 contract over a repository trait, and its PostgreSQL
//! implementation with the SPEC §3 statements.

pub mod audit_trail;
pub mod batch;
mod columns;
pub mod contract;
pub mod dead_letters;
pub mod duplicates;
pub mod error;
pub mod guards;
mod id_order;
pub mod markers_held;
pub mod migrate;
pub mod offset_resets;
pub mod postgres;
pub mod recently_applied;
pub mod replay;
pub mod selection;
pub mod session;
pub mod sqlstate;
pub mod statements;
mod text_values;

pub use contract::{InboxRepository, Origin, Processed, process_history_once};
pub use error::PgInboxError;
pub use markers_held::MarkersHeld;
pub use migrate::{MigrateError, MigrationReport, migrate, migrate_pool};
pub use postgres::PgInbox;
pub use selection::Selection;
pub use session::Session;
pub use sqlstate::{ErrorClass, Step};

/// Events and origins for the inbox's unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::Origin;
    use crate::domain::TicketEvent;
    use crate::domain::story::event_900;

    /// The story's event 900 under another id.
    pub fn event(id: &str) -> TicketEvent {
        event_900().with_event_id(id)
    }

    /// `offset` of partition 0.
    pub fn at(offset: i64) -> Origin {
        Origin {
            partition: 0,
            offset,
        }
    }
}
