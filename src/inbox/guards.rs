//! The `partition_guards` table: each partition's guard against mass dead-lettering, kept where
//! the partition's next owner sees it (a restart, a rebalance or a live rewind no longer starts
//! it afresh).
//!
//! The database decides: a record the database rejected for good is dead-lettered by
//! [`dead_letter_rejected`] in one transaction that first locks the partition's row, stores the
//! letter only while the count of letters in the run is below the bound, and raises the count
//! in the same transaction as the letter. So the count cannot drift from `dead_letters` (both
//! commit or neither does), a redelivered record whose letter exists already is not counted
//! twice, and two members working on the same partition for a moment (a rebalance, a zombie)
//! cannot both pass the bound. At the bound the record is held instead and the row says since
//! when. [`release`] resets the row once a record of the partition was stored.

use chrono::{DateTime, Utc};
use deadpool_postgres::{Object, Pool};
use serde::Serialize;

use super::PgInboxError;
use super::dead_letters;
use super::session::Session;
use super::sqlstate::Step;
use crate::domain::DeadLetter;

/// A partition's guard as the database holds it (the default: no row, nothing counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GuardRow {
    /// Records rejected by the database and dead-lettered since the last record stored.
    pub dead_lettered: u32,
    /// When a rejected record was first held instead: dead-lettering stopped. `None`: not
    /// engaged.
    pub engaged_at: Option<DateTime<Utc>>,
    /// The first record held.
    pub engaged_offset: Option<i64>,
}

impl GuardRow {
    pub fn engaged(&self) -> bool {
        self.engaged_at.is_some()
    }
}

/// What became of a record the database rejected for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// In `dead_letters`: stored now and counted (`counted`), or stored before (a record
    /// delivered again after its letter was written; counted then).
    DeadLettered { counted: bool, guard: GuardRow },
    /// The run reached the bound: not dead-lettered; the record stays Unknown.
    Held { guard: GuardRow },
}

impl Verdict {
    pub fn guard(&self) -> GuardRow {
        match self {
            Verdict::DeadLettered { guard, .. } | Verdict::Held { guard } => *guard,
        }
    }
}

const LOAD: &str = "SELECT dead_lettered, engaged_at, engaged_offset FROM partition_guards \
     WHERE topic = $1 AND kafka_partition = $2";

const ENSURE: &str = "INSERT INTO partition_guards (topic, kafka_partition) VALUES ($1, $2) \
     ON CONFLICT (topic, kafka_partition) DO NOTHING";

const LOCK: &str = "SELECT dead_lettered, engaged_at, engaged_offset FROM partition_guards \
     WHERE topic = $1 AND kafka_partition = $2 FOR UPDATE";

// A letter stored under the bound means dead-lettering goes on (the bound was raised since
// the guard engaged): no longer engaged.
const COUNT: &str = "UPDATE partition_guards SET dead_lettered = dead_lettered + 1, \
     run_started_at = coalesce(run_started_at, now()), engaged_at = NULL, engaged_offset = NULL, \
     updated_at = now() WHERE topic = $1 AND kafka_partition = $2 RETURNING dead_lettered";

const LETTER_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM dead_letters \
     WHERE topic = $1 AND kafka_partition = $2 AND kafka_offset = $3)";

const ENGAGE: &str = "UPDATE partition_guards SET engaged_at = now(), engaged_offset = $3, \
     updated_at = now() WHERE topic = $1 AND kafka_partition = $2 RETURNING engaged_at";

const RELEASE: &str = "UPDATE partition_guards SET dead_lettered = 0, run_started_at = NULL, \
     engaged_at = NULL, engaged_offset = NULL, updated_at = now() \
     WHERE topic = $1 AND kafka_partition = $2 AND (dead_lettered > 0 OR engaged_at IS NOT NULL)";

fn row_of(row: &tokio_postgres::Row) -> GuardRow {
    let dead_lettered: i32 = row.get(0);
    GuardRow {
        dead_lettered: u32::try_from(dead_lettered).unwrap_or(0),
        engaged_at: row.get(1),
        engaged_offset: row.get(2),
    }
}

/// The guard of `partition` of `topic` (the default when it has no row).
pub async fn load(pool: &Pool, topic: &str, partition: i32) -> Result<GuardRow, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(LOAD).await?;
    let row = client.query_opt(&statement, &[&topic, &partition]).await?;
    Ok(row.as_ref().map(row_of).unwrap_or_default())
}

/// Dead-letters `letter`, a record the database rejected for good, unless its partition's run
/// of such letters reached `limit` (see the module docs). An error leaves the record Unknown;
/// the letter and its count are then both stored or both not (a lost COMMIT reply: the next
/// attempt finds the letter).
pub async fn dead_letter_rejected(
    pool: &Pool,
    letter: &DeadLetter,
    limit: u32,
) -> Result<Verdict, PgInboxError> {
    let mut session = Session::begin(pool).await?;
    match decide(session.client(), letter, limit).await {
        Ok(verdict) => match session.commit().await {
            Ok(()) => Ok(verdict),
            Err(error) => {
                let _ = session.rollback().await;
                Err(error)
            }
        },
        Err(error) => {
            let _ = session.rollback().await;
            Err(error)
        }
    }
}

async fn decide(client: &Object, letter: &DeadLetter, limit: u32) -> Result<Verdict, PgInboxError> {
    let place: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&letter.topic, &letter.partition];
    let step = || PgInboxError::at(Step::InsertDeadLetter);
    let ensure = client.prepare_cached(ENSURE).await.map_err(step())?;
    client.execute(&ensure, &place).await.map_err(step())?;
    let lock = client.prepare_cached(LOCK).await.map_err(step())?;
    let mut guard = row_of(&client.query_one(&lock, &place).await.map_err(step())?);

    if guard.dead_lettered < limit {
        let counted = dead_letters::insert(client, letter).await?;
        if counted {
            let count = client.prepare_cached(COUNT).await.map_err(step())?;
            let row = client.query_one(&count, &place).await.map_err(step())?;
            guard = GuardRow {
                dead_lettered: u32::try_from(row.get::<_, i32>(0)).unwrap_or(0),
                ..GuardRow::default()
            };
        }
        return Ok(Verdict::DeadLettered { counted, guard });
    }
    let exists = client.prepare_cached(LETTER_EXISTS).await.map_err(step())?;
    let found: bool = client
        .query_one(&exists, &[&letter.topic, &letter.partition, &letter.offset])
        .await
        .map_err(step())?
        .get(0);
    if found {
        return Ok(Verdict::DeadLettered {
            counted: false,
            guard,
        });
    }
    if guard.engaged_at.is_none() {
        let engage = client.prepare_cached(ENGAGE).await.map_err(step())?;
        let row = client
            .query_one(&engage, &[&letter.topic, &letter.partition, &letter.offset])
            .await
            .map_err(step())?;
        guard.engaged_at = row.get(0);
        guard.engaged_offset = Some(letter.offset);
    }
    Ok(Verdict::Held { guard })
}

/// Ends the partition's run of rejected records (a record of it was stored): true if there
/// was one.
pub async fn release(pool: &Pool, topic: &str, partition: i32) -> Result<bool, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(RELEASE).await?;
    Ok(client.execute(&statement, &[&topic, &partition]).await? > 0)
}
