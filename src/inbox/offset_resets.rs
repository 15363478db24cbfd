//! The `offset_resets` table (migration V8): every position found out of its partition's log,
//! the gap it left, and when reading went on. Written by the service before anything past the
//! gap is committed; read by the admin pages, `verify`, and whoever else needs the record (the
//! query functions take any client).

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use tokio_postgres::GenericClient;

use super::PgInboxError;
use crate::domain::offset_reset::{OffsetReset, ResetPolicy};

const RECORD: &str = "INSERT INTO offset_resets \
     (topic, kafka_partition, from_offset, to_offset, log_start, log_end, policy, reason, \
      resumed_at, resumed_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
             CASE WHEN $4::bigint IS NULL THEN NULL ELSE now() END, \
             CASE WHEN $4::bigint IS NULL THEN NULL ELSE 'policy continue' END) \
     ON CONFLICT (topic, kafka_partition, from_offset) DO UPDATE \
     SET to_offset = EXCLUDED.to_offset, resumed_at = EXCLUDED.resumed_at, \
         resumed_by = EXCLUDED.resumed_by, log_start = EXCLUDED.log_start, \
         log_end = EXCLUDED.log_end \
     WHERE EXCLUDED.to_offset IS NOT NULL \
       AND (offset_resets.to_offset IS NULL OR EXCLUDED.to_offset > offset_resets.to_offset)";

/// Records a reset. Recording the same position again changes nothing, except that a held
/// gap is completed when reading goes on past it, and a gap found again reaching further (the
/// service stopped after reading on and before committing, and the log's start moved on
/// meanwhile) is extended: its row always covers every offset passed over.
pub async fn record(pool: &Pool, reset: &OffsetReset) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client
        .prepare_cached(RECORD)
        .await
        .map_err(PgInboxError::Db)?;
    client
        .execute(
            &statement,
            &[
                &reset.topic,
                &reset.partition,
                &reset.from_offset,
                &reset.to_offset,
                &reset.log_start,
                &reset.log_end,
                &reset.policy.as_str(),
                &reset.reason,
            ],
        )
        .await
        .map_err(PgInboxError::Db)?;
    Ok(())
}

const RESUME: &str = "UPDATE offset_resets \
     SET to_offset = $4, resumed_at = now(), resumed_by = $5 \
     WHERE topic = $1 AND kafka_partition = $2 AND from_offset = $3 AND to_offset IS NULL";

/// A held gap's partition reads on from `to`, by `by` (`live rewind`, say).
pub async fn resume(
    pool: &Pool,
    topic: &str,
    partition: i32,
    from: i64,
    to: i64,
    by: &str,
) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client
        .prepare_cached(RESUME)
        .await
        .map_err(PgInboxError::Db)?;
    client
        .execute(&statement, &[&topic, &partition, &from, &to, &by])
        .await
        .map_err(PgInboxError::Db)?;
    Ok(())
}

/// A recorded reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetRow {
    pub partition: i32,
    pub from_offset: i64,
    /// `None`: held, nothing read past it yet.
    pub to_offset: Option<i64>,
    pub log_start: Option<i64>,
    pub log_end: Option<i64>,
    pub policy: String,
    pub reason: String,
    pub detected_at: DateTime<Utc>,
    pub resumed_at: Option<DateTime<Utc>>,
    pub resumed_by: Option<String>,
}

impl ResetRow {
    /// Offsets passed over without being read.
    pub fn skipped(&self) -> i64 {
        self.to_offset
            .map_or(0, |to| (to - self.from_offset).max(0))
    }

    /// The policy as the service applied it.
    pub fn policy(&self) -> Option<ResetPolicy> {
        self.policy.parse().ok()
    }
}

const LIST: &str = "SELECT kafka_partition, from_offset, to_offset, log_start, log_end, policy, \
     reason, detected_at, resumed_at, resumed_by \
     FROM offset_resets \
     WHERE topic = $1 AND ($2::integer IS NULL OR kafka_partition = $2) \
     ORDER BY detected_at DESC, kafka_partition, from_offset DESC \
     LIMIT $3";

/// [`list`] through a pool.
pub async fn list_from(
    pool: &Pool,
    topic: &str,
    partition: Option<i32>,
    limit: i64,
) -> Result<Vec<ResetRow>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    list(&**client, topic, partition, limit).await
}

/// The newest resets of `topic` (of one partition, or of all), at most `limit`.
pub async fn list<C: GenericClient>(
    client: &C,
    topic: &str,
    partition: Option<i32>,
    limit: i64,
) -> Result<Vec<ResetRow>, PgInboxError> {
    let rows = client
        .query(LIST, &[&topic, &partition, &limit])
        .await
        .map_err(PgInboxError::Db)?;
    Ok(rows
        .iter()
        .map(|row| ResetRow {
            partition: row.get(0),
            from_offset: row.get(1),
            to_offset: row.get(2),
            log_start: row.get(3),
            log_end: row.get(4),
            policy: row.get(5),
            reason: row.get(6),
            detected_at: row.get(7),
            resumed_at: row.get(8),
            resumed_by: row.get(9),
        })
        .collect())
}
