//! Why a duplicate happened: the inbox remembers where each event id was first seen, so a
//! later `AlreadyApplied` can be told apart as a redelivery, a republish or a conflict.
//! This runs after the §4 transaction and never changes its outcome.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use super::{Origin, PgInboxError};
use crate::domain::DuplicateCause;
use crate::domain::TicketEvent;

/// Where each of several event ids was first seen, in one statement: per id a primary-key
/// lookup in a LATERAL subquery. The `LIMIT 1` keeps the planner from turning it into a join:
/// a cached generic plan of `JOIN unnest($1)` or `= ANY($1)` made while the inbox is empty is
/// a hash join over a sequential scan of the whole inbox (EXPLAIN with
/// `plan_cache_mode = force_generic_plan`), where this stays an index lookup per id however
/// the table grows. One statement per batch instead of one per duplicate: replaying a topic
/// the inbox already holds ran 256 lookups per batch, each a statement of its own.
const FIRST_SEEN: &str = "SELECT d.event_id, f.first_partition, f.first_offset, \
            f.ticket_id, f.from_status, f.to_status, f.changed_at \
     FROM unnest($1::text[]) AS d (event_id) \
     CROSS JOIN LATERAL ( \
         SELECT i.first_partition, i.first_offset, \
                h.ticket_id, h.from_status, h.to_status, h.changed_at \
         FROM inbox i LEFT JOIN history_events h ON h.event_id = i.event_id \
         WHERE i.event_id = d.event_id \
         LIMIT 1) AS f";

/// What the database remembers of an event id.
struct FirstSeen {
    partition: Option<i32>,
    offset: Option<i64>,
    stored: Option<(String, String, String, DateTime<Utc>)>,
}

/// The cause, from where the event was first seen and what was stored then (pure).
fn cause(first: Option<&FirstSeen>, event: &TicketEvent, origin: Origin) -> DuplicateCause {
    let Some(first) = first else {
        return DuplicateCause::Unclassified;
    };
    if (first.partition, first.offset) == (Some(origin.partition), Some(origin.offset)) {
        return DuplicateCause::Redelivery;
    }
    let same_payload = first.stored.as_ref().is_some_and(|(ticket, from, to, at)| {
        *ticket == event.ticket_id
            && *from == event.from_status
            && *to == event.to_status
            && *at == event.changed_at
    });
    if same_payload {
        DuplicateCause::Republish
    } else {
        DuplicateCause::Conflicting
    }
}

/// Classifies duplicates of several events in one query, in the order given.
pub async fn classify_many(
    pool: &Pool,
    duplicates: &[(&TicketEvent, Origin)],
) -> Result<Vec<DuplicateCause>, PgInboxError> {
    if duplicates.is_empty() {
        return Ok(Vec::new());
    }
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(FIRST_SEEN).await?;
    let mut ids: Vec<&str> = duplicates
        .iter()
        .map(|(event, _)| event.event_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut seen: HashMap<String, FirstSeen> = HashMap::new();
    for row in client.query(&statement, &[&ids]).await? {
        let stored = match (row.get(3), row.get(4), row.get(5), row.get(6)) {
            (Some(ticket), Some(from), Some(to), Some(at)) => Some((ticket, from, to, at)),
            _ => None,
        };
        seen.insert(
            row.get(0),
            FirstSeen {
                partition: row.get(1),
                offset: row.get(2),
                stored,
            },
        );
    }
    Ok(duplicates
        .iter()
        .map(|(event, origin)| cause(seen.get(&event.event_id), event, *origin))
        .collect())
}

/// Classifies a duplicate of `event` delivered at `origin`.
pub async fn classify(
    pool: &Pool,
    event: &TicketEvent,
    origin: Origin,
) -> Result<DuplicateCause, PgInboxError> {
    Ok(classify_many(pool, &[(event, origin)])
        .await?
        .pop()
        .unwrap_or(DuplicateCause::Unclassified))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::story::event_900;

    const AT_7: Origin = Origin {
        partition: 0,
        offset: 7,
    };
    const AT_8: Origin = Origin {
        partition: 0,
        offset: 8,
    };

    fn first_at_7() -> FirstSeen {
        let e = event_900();
        FirstSeen {
            partition: Some(0),
            offset: Some(7),
            stored: Some((e.ticket_id, e.from_status, e.to_status, e.changed_at)),
        }
    }

    #[test]
    fn the_same_place_is_a_redelivery_another_a_republish_or_a_conflict() {
        let first = first_at_7();
        assert_eq!(
            cause(Some(&first), &event_900(), AT_7),
            DuplicateCause::Redelivery
        );
        assert_eq!(
            cause(Some(&first), &event_900(), AT_8),
            DuplicateCause::Republish
        );
        let mut changed = event_900();
        changed.to_status = "closed".into();
        assert_eq!(
            cause(Some(&first), &changed, AT_8),
            DuplicateCause::Conflicting
        );
        assert_eq!(
            cause(None, &event_900(), AT_8),
            DuplicateCause::Unclassified
        );
    }
}
