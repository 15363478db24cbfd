//! What the admin pages read from the database: dead letters, a ticket's history and the
//! audit trail of operator actions. Every query is parameterised.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

use crate::inbox::PgInboxError;

/// Rows per dead-letter page.
pub const DEAD_LETTERS_PER_PAGE: i64 = 50;
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
}

/// Filters of the dead-letter list.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    pub partition: Option<i32>,
    pub reason: Option<String>,
    pub page: i64,
}

const DEAD_LETTERS: &str = "SELECT topic, kafka_partition, kafka_offset, record_key, \
        substring(payload FROM 1 FOR 8192), coalesce(octet_length(payload), 0)::bigint, \
        reason, message, dead_lettered_at \
     FROM dead_letters \
     WHERE ($1::int IS NULL OR kafka_partition = $1) AND ($2::text IS NULL OR reason = $2) \
     ORDER BY dead_lettered_at DESC, kafka_partition, kafka_offset DESC \
     LIMIT $3 OFFSET $4";

const DEAD_LETTER_COUNT: &str = "SELECT count(*) FROM dead_letters \
     WHERE ($1::int IS NULL OR kafka_partition = $1) AND ($2::text IS NULL OR reason = $2)";

/// One page of dead letters, newest first, and how many match in all.
pub async fn dead_letters(
    pool: &Pool,
    filter: &DeadLetterFilter,
) -> Result<(Vec<DeadLetterRow>, i64), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let offset = (filter.page.max(1) - 1) * DEAD_LETTERS_PER_PAGE;
    let list = client.prepare_cached(DEAD_LETTERS).await?;
    let rows = client
        .query(
            &list,
            &[
                &filter.partition,
                &filter.reason,
                &DEAD_LETTERS_PER_PAGE,
                &offset,
            ],
        )
        .await?;
    let count = client.prepare_cached(DEAD_LETTER_COUNT).await?;
    let total: i64 = client
        .query_one(&count, &[&filter.partition, &filter.reason])
        .await?
        .get(0);
    let letters = rows
        .iter()
        .map(|row| {
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
            }
        })
        .collect();
    Ok((letters, total))
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
    pub partition: i32,
    pub action: String,
    pub actor: String,
    pub result: String,
}

const RECORD_ACTION: &str =
    "INSERT INTO admin_actions (kafka_partition, action, actor, result) VALUES ($1, $2, $3, $4)";

/// Appends an operator action to the audit trail.
pub async fn record_action(
    pool: &Pool,
    partition: i32,
    action: &str,
    actor: &str,
    result: &str,
) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(RECORD_ACTION).await?;
    client
        .execute(&statement, &[&partition, &action, &actor, &result])
        .await?;
    Ok(())
}

const RECENT_ACTIONS: &str = "SELECT acted_at, kafka_partition, action, actor, result \
     FROM admin_actions WHERE ($1::int IS NULL OR kafka_partition = $1) \
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
            action: row.get(2),
            actor: row.get(3),
            result: row.get(4),
        })
        .collect())
}
