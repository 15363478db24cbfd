//! Why a duplicate happened: the inbox remembers where each event id was first seen, so a
//! later `AlreadyApplied` can be told apart as a redelivery, a republish or a conflict.
//! This runs after the §4 transaction and never changes its outcome.

use deadpool_postgres::Pool;

use super::{Origin, PgInboxError};
use crate::actors::status::DuplicateCause;
use crate::domain::TicketEvent;

const FIRST_SEEN: &str = "SELECT i.first_partition, i.first_offset, \
            h.ticket_id, h.from_status, h.to_status, h.changed_at \
     FROM inbox i LEFT JOIN history_events h ON h.event_id = i.event_id \
     WHERE i.event_id = $1";

/// Classifies a duplicate of `event` delivered at `origin`.
pub async fn classify(
    pool: &Pool,
    event: &TicketEvent,
    origin: Origin,
) -> Result<DuplicateCause, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(FIRST_SEEN).await?;
    let Some(row) = client.query_opt(&statement, &[&event.event_id]).await? else {
        return Ok(DuplicateCause::Unclassified);
    };
    let first = (row.get::<_, Option<i32>>(0), row.get::<_, Option<i64>>(1));
    if first == (Some(origin.partition), Some(origin.offset)) {
        return Ok(DuplicateCause::Redelivery);
    }
    let stored = (
        row.get::<_, Option<String>>(2),
        row.get::<_, Option<String>>(3),
        row.get::<_, Option<String>>(4),
        row.get::<_, Option<chrono::DateTime<chrono::Utc>>>(5),
    );
    let same_payload = stored
        == (
            Some(event.ticket_id.clone()),
            Some(event.from_status.clone()),
            Some(event.to_status.clone()),
            Some(event.changed_at),
        );
    Ok(if same_payload {
        DuplicateCause::Republish
    } else {
        DuplicateCause::Conflicting
    })
}
