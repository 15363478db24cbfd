//! What the admin pages read from the database: dead letters (by keyset pages), a ticket's
//! history and the audit trail of operator actions (written by `inbox::audit_trail`). Every
//! query is parameterised.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

use crate::inbox::PgInboxError;
use crate::inbox::Selection;
use crate::inbox::selection::selected_letters;

/// Rows per dead-letter page.
pub const DEAD_LETTERS_PER_PAGE: i64 = 50;
/// Dead letters counted at most for the "in all" figure: counting is a scan, and every
/// anonymous page load would pay for it (10,000 cost PostgreSQL several times the page's rows).
pub const DEAD_LETTER_COUNT_CAP: i64 = 1_000;
/// Characters of a payload shown before it is cut.
const PAYLOAD_PREVIEW_CHARS: usize = 2000;

#[derive(Debug, Clone, Serialize)]
pub struct DeadLetterRow {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    /// The payload as (lossy) UTF-8, cut to a preview; escaped by the template.
    pub payload_preview: String,
    pub payload_bytes: i64,
    pub reason: String,
    pub message: String,
    pub at: DateTime<Utc>,
    /// What became of it (`new`, `applied`, `still_rejected`).
    pub state: String,
    pub replayed_at: Option<DateTime<Utc>>,
    pub replayed_by: Option<String>,
    pub replay_message: Option<String>,
}

/// A dead letter's place in the list (newest first): when it was stored, then partition and
/// offset, descending. Letters stored by one transaction share a time but are of one
/// partition, so the three tell every letter apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub at_micros: i64,
    pub partition: i32,
    pub offset: i64,
}

impl Cursor {
    pub fn of(row: &DeadLetterRow) -> Cursor {
        Cursor {
            at_micros: row.at.timestamp_micros(),
            partition: row.partition,
            offset: row.offset,
        }
    }

    /// `<microseconds>.<partition>.<offset>`, as links carry it.
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.at_micros, self.partition, self.offset)
    }

    pub fn parse(text: &str) -> Option<Cursor> {
        let mut parts = text.split('.');
        let cursor = Cursor {
            at_micros: parts.next()?.parse().ok()?,
            partition: parts.next()?.parse().ok()?,
            offset: parts.next()?.parse().ok()?,
        };
        let valid = parts.next().is_none()
            && DateTime::<Utc>::from_timestamp_micros(cursor.at_micros).is_some();
        valid.then_some(cursor)
    }

    fn at(&self) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_micros(self.at_micros).unwrap_or_default()
    }
}

/// Which page of the list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Page {
    /// The newest letters.
    #[default]
    Newest,
    /// The letters just older than the cursor.
    Older(Cursor),
    /// The letters just newer than the cursor.
    Newer(Cursor),
}

/// Filters of the dead-letter list: which letters, and which page of them.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    pub selection: Selection,
    pub page: Page,
}

/// A page of dead letters, newest first, and where the neighbouring pages start.
#[derive(Debug, Clone)]
pub struct DeadLetterPage {
    pub rows: Vec<DeadLetterRow>,
    pub older: Option<Cursor>,
    pub newer: Option<Cursor>,
}

const DEAD_LETTER_COLUMNS: &str = "SELECT topic, kafka_partition, kafka_offset, record_key, \
        substring(payload FROM 1 FOR 8192), coalesce(octet_length(payload), 0)::bigint, \
        reason, message, dead_lettered_at, state, replayed_at, replayed_by, replay_message \
        FROM dead_letters";

// Keyset pagination: a page reads its rows from the time index, however deep it is. The time
// bound repeats the row comparison's first column so that the index serves it.
const NEWEST_DEAD_LETTERS: &str = concat!(
    "WHERE ",
    selected_letters!(),
    " ORDER BY dead_lettered_at DESC, kafka_partition DESC, kafka_offset DESC LIMIT $6"
);

const OLDER_DEAD_LETTERS: &str = concat!(
    "WHERE ",
    selected_letters!(),
    " AND dead_lettered_at <= $7 \
       AND (dead_lettered_at, kafka_partition, kafka_offset) < ($7, $8, $9) \
     ORDER BY dead_lettered_at DESC, kafka_partition DESC, kafka_offset DESC LIMIT $6"
);

const NEWER_DEAD_LETTERS: &str = concat!(
    "WHERE ",
    selected_letters!(),
    " AND dead_lettered_at >= $7 \
       AND (dead_lettered_at, kafka_partition, kafka_offset) > ($7, $8, $9) \
     ORDER BY dead_lettered_at, kafka_partition, kafka_offset LIMIT $6"
);

/// Up to `limit` dead letters of `filter`'s page, newest first.
pub async fn dead_letters(
    pool: &Pool,
    filter: &DeadLetterFilter,
    limit: i64,
) -> Result<DeadLetterPage, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    // One more than shown: whether a page lies beyond.
    let fetch = limit + 1;
    let bound = filter.selection.bound();
    let mut matching = bound.params().to_vec();
    matching.push(&fetch);
    let rows = match filter.page {
        Page::Newest => {
            let statement = client
                .prepare_cached(&format!("{DEAD_LETTER_COLUMNS} {NEWEST_DEAD_LETTERS}"))
                .await?;
            client.query(&statement, &matching).await?
        }
        Page::Older(cursor) | Page::Newer(cursor) => {
            let sql = match filter.page {
                Page::Newer(_) => NEWER_DEAD_LETTERS,
                _ => OLDER_DEAD_LETTERS,
            };
            let statement = client
                .prepare_cached(&format!("{DEAD_LETTER_COLUMNS} {sql}"))
                .await?;
            let at = cursor.at();
            let mut params = matching;
            params.extend_from_slice(&[&at, &cursor.partition, &cursor.offset]);
            client.query(&statement, &params).await?
        }
    };
    let mut letters: Vec<DeadLetterRow> = rows.iter().map(dead_letter_row).collect();
    let more = letters.len() as i64 > limit;
    letters.truncate(usize::try_from(limit).unwrap_or(0));
    if matches!(filter.page, Page::Newer(_)) {
        letters.reverse();
    }
    let (first, last) = (
        letters.first().map(Cursor::of),
        letters.last().map(Cursor::of),
    );
    // Beside a page reached by a cursor there is always the page it came from.
    let (older, newer) = match filter.page {
        Page::Newest => (last.filter(|_| more), None),
        Page::Older(_) => (last.filter(|_| more), first),
        Page::Newer(_) => (last, first.filter(|_| more)),
    };
    Ok(DeadLetterPage {
        rows: letters,
        older,
        newer,
    })
}

const ONE_DEAD_LETTER: &str = "WHERE topic = $1 AND kafka_partition = $2 AND kafka_offset = $3";

/// One dead letter, by its place in the topic.
pub async fn dead_letter(
    pool: &Pool,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<DeadLetterRow>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client
        .prepare_cached(&format!("{DEAD_LETTER_COLUMNS} {ONE_DEAD_LETTER}"))
        .await?;
    let row = client
        .query_opt(&statement, &[&topic, &partition, &offset])
        .await?;
    Ok(row.as_ref().map(dead_letter_row))
}

fn dead_letter_row(row: &tokio_postgres::Row) -> DeadLetterRow {
    let payload: Option<Vec<u8>> = row.get(4);
    let key: Option<Vec<u8>> = row.get(3);
    DeadLetterRow {
        topic: row.get(0),
        partition: row.get(1),
        offset: row.get(2),
        key: key.map(|k| String::from_utf8_lossy(&k).into_owned()),
        payload_preview: preview(payload.as_deref().unwrap_or_default()),
        payload_bytes: row.get(5),
        reason: row.get(6),
        message: row.get(7),
        at: row.get(8),
        state: row.get(9),
        replayed_at: row.get(10),
        replayed_by: row.get(11),
        replay_message: row.get(12),
    }
}

const DEAD_LETTER_COUNT: &str = concat!(
    "SELECT count(*) FROM (SELECT 1 FROM dead_letters WHERE ",
    selected_letters!(),
    " LIMIT $6) AS capped"
);

/// How many dead letters match `filter`, counted up to [`DEAD_LETTER_COUNT_CAP`] + 1 (more
/// than the cap means "more than that").
pub async fn count_dead_letters(
    pool: &Pool,
    filter: &DeadLetterFilter,
) -> Result<i64, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(DEAD_LETTER_COUNT).await?;
    let bound = filter.selection.bound();
    let cap = DEAD_LETTER_COUNT_CAP + 1;
    let mut params = bound.params().to_vec();
    params.push(&cap);
    Ok(client.query_one(&statement, &params).await?.get(0))
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(PAYLOAD_PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    pub event_id: String,
    pub from_status: String,
    pub to_status: String,
    pub changed_at: DateTime<Utc>,
}

const TICKET_HISTORY: &str = "SELECT event_id, from_status, to_status, changed_at \
     FROM history_events WHERE ticket_id = $1 ORDER BY changed_at, event_id LIMIT 1000";

/// A ticket's transitions in time order.
pub async fn ticket_history(pool: &Pool, ticket_id: &str) -> Result<Vec<HistoryRow>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(TICKET_HISTORY).await?;
    Ok(client
        .query(&statement, &[&ticket_id])
        .await?
        .iter()
        .map(|row| HistoryRow {
            event_id: row.get(0),
            from_status: row.get(1),
            to_status: row.get(2),
            changed_at: row.get(3),
        })
        .collect())
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditRow {
    pub at: DateTime<Utc>,
    /// `None` for an action over many partitions.
    pub partition: Option<i32>,
    /// The record the action was about, if one.
    pub offset: Option<i64>,
    pub action: String,
    pub actor: String,
    pub result: String,
    /// The operator's comment, or what the action found.
    pub detail: Option<String>,
}

const RECENT_ACTIONS: &str = "SELECT acted_at, kafka_partition, kafka_offset, action, actor, \
     result, detail FROM admin_actions WHERE ($1::int IS NULL OR kafka_partition = $1) \
     ORDER BY acted_at DESC, id DESC LIMIT $2";

/// The latest operator actions, for one partition or all.
pub async fn recent_actions(
    pool: &Pool,
    partition: Option<i32>,
    limit: i64,
) -> Result<Vec<AuditRow>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(RECENT_ACTIONS).await?;
    Ok(client
        .query(&statement, &[&partition, &limit])
        .await?
        .iter()
        .map(|row| AuditRow {
            at: row.get(0),
            partition: row.get(1),
            offset: row.get(2),
            action: row.get(3),
            actor: row.get(4),
            result: row.get(5),
            detail: row.get(6),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_survives_a_link_and_rejects_anything_else() {
        let cursor = Cursor {
            at_micros: 1_790_000_000_123_456,
            partition: 3,
            offset: 42,
        };
        assert_eq!(Cursor::parse(&cursor.encode()), Some(cursor));
        for text in [
            "",
            "1.2",
            "1.2.3.4",
            "a.b.c",
            "1.2.x",
            "9223372036854775807.0.0",
        ] {
            assert_eq!(Cursor::parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_preview_cuts_long_payloads_on_a_character_boundary() {
        let long = "é".repeat(PAYLOAD_PREVIEW_CHARS + 5);
        let shown = preview(long.as_bytes());
        assert_eq!(shown.chars().count(), PAYLOAD_PREVIEW_CHARS + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(preview(b"short"), "short");
    }
}
