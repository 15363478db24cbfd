//! What the projection holds for a batch of records read from the topic: one statement for the
//! events, one for the dead letters, whatever the batch size; and at the end, the history rows
//! whose events were not in the range read.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use super::report::Stored;
use crate::domain::{DeadLetter, TicketEvent};
use crate::inbox::{Origin, PgInboxError};

/// A valid event as the record carries it.
pub struct EventRecord<'a> {
    pub origin: Origin,
    pub event: &'a TicketEvent,
}

/// What the database holds for one event id.
#[derive(Debug, Clone)]
struct Row {
    first: Option<Origin>,
    /// `(ticket_id, from_status, to_status, changed_at)` of the history row, if there is one.
    history: Option<(String, String, String, DateTime<Utc>)>,
}

/// The projection's answers for one batch.
#[derive(Debug, Default)]
pub struct Found {
    rows: HashMap<String, Row>,
    dead_letters: HashSet<(i32, i64)>,
}

impl Found {
    /// What the projection holds for this record's event.
    pub fn stored(&self, record: &EventRecord<'_>) -> Stored {
        let Some(row) = self.rows.get(record.event.event_id()) else {
            return Stored::Nothing;
        };
        let Some((ticket, from, to, changed_at)) = &row.history else {
            return Stored::MarkerOnly;
        };
        let event = record.event;
        Stored::Row {
            first_here: row.first.is_none_or(|first| first == record.origin),
            same: *ticket == event.ticket_id()
                && *from == event.from_status()
                && *to == event.to_status()
                && *changed_at == event.changed_at,
        }
    }

    /// Whether `dead_letters` holds the record.
    pub fn dead_lettered(&self, letter: &DeadLetter) -> bool {
        self.dead_letters
            .contains(&(letter.partition, letter.offset))
    }
}

const STORED: &str = "SELECT i.event_id, i.first_partition, i.first_offset, \
            h.ticket_id, h.from_status, h.to_status, h.changed_at \
     FROM (SELECT DISTINCT unnest($1::text[]) AS event_id) AS q \
     JOIN inbox i ON i.event_id = q.event_id \
     LEFT JOIN history_events h ON h.event_id = q.event_id";

const DEAD_LETTERED: &str = "SELECT d.kafka_partition, d.kafka_offset \
     FROM unnest($2::int[], $3::bigint[]) AS q(kafka_partition, kafka_offset) \
     JOIN dead_letters d ON d.topic = $1 \
      AND d.kafka_partition = q.kafka_partition AND d.kafka_offset = q.kafka_offset";

/// Looks up a batch of events and dead letters.
pub async fn look_up(
    pool: &Pool,
    topic: &str,
    events: &[EventRecord<'_>],
    letters: &[&DeadLetter],
) -> Result<Found, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let mut found = Found::default();
    if !events.is_empty() {
        let ids: Vec<&str> = events.iter().map(|e| e.event.event_id()).collect();
        let statement = client.prepare_cached(STORED).await?;
        for row in client.query(&statement, &[&ids]).await? {
            let first = match (row.get::<_, Option<i32>>(1), row.get::<_, Option<i64>>(2)) {
                (Some(partition), Some(offset)) => Some(Origin { partition, offset }),
                _ => None,
            };
            let history = row
                .get::<_, Option<String>>(3)
                .map(|ticket| (ticket, row.get(4), row.get(5), row.get(6)));
            found.rows.insert(row.get(0), Row { first, history });
        }
    }
    if !letters.is_empty() {
        let partitions: Vec<i32> = letters.iter().map(|l| l.partition).collect();
        let offsets: Vec<i64> = letters.iter().map(|l| l.offset).collect();
        let statement = client.prepare_cached(DEAD_LETTERED).await?;
        for row in client
            .query(&statement, &[&topic, &partitions, &offsets])
            .await?
        {
            found.dead_letters.insert((row.get(0), row.get(1)));
        }
    }
    Ok(found)
}

const OUTSIDE: &str = "SELECT i.first_partition, count(*) \
     FROM inbox i JOIN history_events h ON h.event_id = i.event_id \
     LEFT JOIN unnest($1::int[], $2::bigint[], $3::bigint[]) AS r(kafka_partition, start, stop) \
       ON r.kafka_partition = i.first_partition \
     WHERE r.kafka_partition IS NULL OR i.first_offset IS NULL \
        OR i.first_offset < r.start OR i.first_offset >= r.stop \
     GROUP BY i.first_partition";

/// History rows whose event the inbox first saw outside the ranges read: per partition of the
/// ranges, and in all for rows with no origin or another partition.
pub async fn rows_outside(
    pool: &Pool,
    ranges: &BTreeMap<i32, (i64, i64)>,
) -> Result<(BTreeMap<i32, u64>, u64), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let partitions: Vec<i32> = ranges.keys().copied().collect();
    let starts: Vec<i64> = ranges.values().map(|r| r.0).collect();
    let ends: Vec<i64> = ranges.values().map(|r| r.1).collect();
    let statement = client.prepare_cached(OUTSIDE).await?;
    let mut per_partition = BTreeMap::new();
    let mut elsewhere = 0;
    for row in client
        .query(&statement, &[&partitions, &starts, &ends])
        .await?
    {
        let count = u64::try_from(row.get::<_, i64>(1)).unwrap_or_default();
        match row.get::<_, Option<i32>>(0) {
            Some(partition) if ranges.contains_key(&partition) => {
                per_partition.insert(partition, count);
            }
            _ => elsewhere += count,
        }
    }
    Ok((per_partition, elsewhere))
}
