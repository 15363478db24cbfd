//! Why a duplicate happened: the inbox remembers where each event id was first seen, so a
//! later `AlreadyApplied` can be told apart as a redelivery, a republish or a conflict.
//! This runs after the §4 transaction and never changes its outcome.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use super::{Origin, PgInboxError};
use crate::domain::DuplicateCause;
use crate::domain::TicketEvent;

/// Where each duplicate's event was first seen, in one statement: per duplicate a primary-key
/// lookup in a LATERAL subquery, and the stored history row only when the duplicate is not a
/// redelivery (a `One-Time Filter` in the plan skips that second lookup, which a replayed
/// topic never needs: 1,280 buffer hits for 256 redeliveries instead of 2,560). The `LIMIT 1`
/// keeps the planner from turning the lookups into joins: a cached generic plan of
/// `JOIN unnest($1)` or `= ANY($1)` made while the inbox is empty is a hash join over a
/// sequential scan of the whole inbox (EXPLAIN with `plan_cache_mode = force_generic_plan`),
/// where this stays an index lookup per id however the table grows. Rows come back numbered
/// by their position in the arrays.
const FIRST_SEEN: &str = "SELECT d.n, f.first_partition, f.first_offset, \
            h.ticket_id, h.from_status, h.to_status, h.changed_at \
     FROM unnest($1::text[], $2::int[], $3::bigint[]) WITH ORDINALITY \
          AS d (event_id, kafka_partition, kafka_offset, n) \
     CROSS JOIN LATERAL ( \
         SELECT i.first_partition, i.first_offset FROM inbox i \
         WHERE i.event_id = d.event_id \
         LIMIT 1) AS f \
     LEFT JOIN LATERAL ( \
         SELECT h.ticket_id, h.from_status, h.to_status, h.changed_at FROM history_events h \
         WHERE h.event_id = d.event_id \
           AND (f.first_partition, f.first_offset) \
               IS DISTINCT FROM (d.kafka_partition, d.kafka_offset) \
         LIMIT 1) AS h ON true";

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
    rule((first.partition, first.offset), origin, || {
        first.stored.as_ref().is_some_and(|(ticket, from, to, at)| {
            let stored = StoredRow {
                ticket_id: ticket,
                from_status: from,
                to_status: to,
                changed_at: *at,
            };
            stored.holds(event)
        })
    })
}

/// What an event's history row holds beside its id: what a repeat of the event is compared
/// with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredRow<'a> {
    pub ticket_id: &'a str,
    pub from_status: &'a str,
    pub to_status: &'a str,
    pub changed_at: DateTime<Utc>,
}

impl StoredRow<'_> {
    /// The row `event` makes.
    pub fn of(event: &TicketEvent) -> StoredRow<'_> {
        StoredRow {
            ticket_id: event.ticket_id(),
            from_status: event.from_status(),
            to_status: event.to_status(),
            changed_at: event.changed_at,
        }
    }

    /// Whether `event` would make this row: a repeat with the same payload.
    fn holds(&self, event: &TicketEvent) -> bool {
        *self == StoredRow::of(event)
    }
}

/// The rule: first seen at the same place is a redelivery; elsewhere, the same payload is a
/// republish and another one a conflict.
fn rule(
    first_seen_at: (Option<i32>, Option<i64>),
    origin: Origin,
    same_payload: impl FnOnce() -> bool,
) -> DuplicateCause {
    if first_seen_at == (Some(origin.partition), Some(origin.offset)) {
        DuplicateCause::Redelivery
    } else if same_payload() {
        DuplicateCause::Republish
    } else {
        DuplicateCause::Conflicting
    }
}

/// The cause of a duplicate, whose own row would be `repeat`, delivered at `origin`, of an
/// event stored as `first` from `first_origin` by a committed transaction of this partition:
/// what the database would answer, known without asking it (its marker holds `first_origin`,
/// its history row `first`).
pub fn cause_of_repeat(
    first: StoredRow<'_>,
    first_origin: Origin,
    repeat: StoredRow<'_>,
    origin: Origin,
) -> DuplicateCause {
    let at = (Some(first_origin.partition), Some(first_origin.offset));
    rule(at, origin, || first == repeat)
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
    let ids: Vec<&str> = duplicates
        .iter()
        .map(|(event, _)| event.event_id())
        .collect();
    let partitions: Vec<i32> = duplicates.iter().map(|(_, o)| o.partition).collect();
    let offsets: Vec<i64> = duplicates.iter().map(|(_, o)| o.offset).collect();
    let mut seen: Vec<Option<FirstSeen>> = Vec::new();
    seen.resize_with(duplicates.len(), || None);
    for row in client
        .query(&statement, &[&ids, &partitions, &offsets])
        .await?
    {
        let stored = match (row.get(3), row.get(4), row.get(5), row.get(6)) {
            (Some(ticket), Some(from), Some(to), Some(at)) => Some((ticket, from, to, at)),
            _ => None,
        };
        let position = usize::try_from(row.get::<_, i64>(0) - 1).ok();
        if let Some(slot) = position.and_then(|p| seen.get_mut(p)) {
            *slot = Some(FirstSeen {
                partition: row.get(1),
                offset: row.get(2),
                stored,
            });
        }
    }
    Ok(duplicates
        .iter()
        .zip(&seen)
        .map(|((event, origin), first)| cause(first.as_ref(), event, *origin))
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
            stored: Some((
                e.ticket_id().to_string(),
                e.from_status().to_string(),
                e.to_status().to_string(),
                e.changed_at,
            )),
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
        let changed = event_900().with_to_status("closed");
        assert_eq!(
            cause(Some(&first), &changed, AT_8),
            DuplicateCause::Conflicting
        );
        assert_eq!(
            cause(None, &event_900(), AT_8),
            DuplicateCause::Unclassified
        );
    }

    proptest::proptest! {
        #[test]
        fn a_repeat_of_an_event_applied_lately_gets_the_databases_answer(
            partition in 0i32..2,
            offset in 6i64..9,
            ticket in proptest::bool::ANY,
            to in proptest::sample::select(vec!["resolved", "closed"]),
            seconds in 0i64..2,
        ) {
            // What the database holds after applying event 900 at AT_7, against a repeat that
            // may differ in any field and in where it was read.
            let first = first_at_7();
            let mut event = event_900();
            if ticket {
                event = event.with_ticket_id("ticket-901");
            }
            event = event.with_to_status(to);
            event.changed_at += chrono::Duration::seconds(seconds);
            let origin = Origin { partition, offset };
            proptest::prop_assert_eq!(
                cause_of_repeat(StoredRow::of(&event_900()), AT_7, StoredRow::of(&event), origin),
                cause(Some(&first), &event, origin)
            );
        }
    }
}
