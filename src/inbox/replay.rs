//! Replaying dead letters back through the inbox transaction (an operator's remedy once the
//! cause is fixed): the stored bytes are parsed again and the event goes through
//! `process_history_once` with the letter's partition and offset as its origin. The inbox keeps
//! it idempotent: an event stored already is a duplicate, so replaying twice stores it once.
//! The letter records what became of it (`state`, when, by whom, what the replay said).
//!
//! A replay that fails for a reason that may pass (the database unavailable, a failed COMMIT)
//! changes nothing about the letter and says so; replaying again is safe.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use super::contract::{Origin, Processed, process_history_once};
pub use super::selection::Selection;
use super::selection::selected_letters;
use super::{PgInbox, PgInboxError};
use crate::domain::{LetterState, TicketEvent};

/// One dead letter, by its place in the topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetterId {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    /// The replay stored the event.
    Applied,
    /// The event was stored already (a duplicate): nothing was written but the letter's state.
    AlreadyApplied,
    /// Still not an event the database takes; why.
    StillRejected(String),
}

impl Replayed {
    /// The letter's state after the replay.
    pub fn state(&self) -> LetterState {
        match self {
            Replayed::Applied | Replayed::AlreadyApplied => LetterState::Applied,
            Replayed::StillRejected(_) => LetterState::StillRejected,
        }
    }

    /// What the replay said, as the letter and the audit trail keep it.
    pub fn message(&self) -> String {
        match self {
            Replayed::Applied => "stored by the replay".to_owned(),
            Replayed::AlreadyApplied => "stored already (the replay was a duplicate)".to_owned(),
            Replayed::StillRejected(why) => format!("still rejected: {why}"),
        }
    }
}

/// Letters replayed by one [`replay_matching`], by what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplaySummary {
    pub applied: u64,
    pub already_applied: u64,
    pub still_rejected: u64,
    /// More letters match than one call replays.
    pub more: bool,
}

impl ReplaySummary {
    pub fn replayed(&self) -> u64 {
        self.applied + self.already_applied + self.still_rejected
    }

    fn count(&mut self, replayed: &Replayed) {
        match replayed {
            Replayed::Applied => self.applied += 1,
            Replayed::AlreadyApplied => self.already_applied += 1,
            Replayed::StillRejected(_) => self.still_rejected += 1,
        }
    }
}

impl std::fmt::Display for ReplaySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} replayed: {} stored, {} stored already, {} still rejected",
            self.replayed(),
            self.applied,
            self.already_applied,
            self.still_rejected
        )?;
        if self.more {
            f.write_str("; more match (replay again to go on)")?;
        }
        Ok(())
    }
}

/// A replay could not say what became of a letter.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("there is no dead letter at partition {partition}, offset {offset} of {topic}")]
    NotFound {
        topic: String,
        partition: i32,
        offset: i64,
    },
    #[error("the replay failed; the letter is unchanged and replaying it again is safe")]
    Database(#[source] PgInboxError),
    /// Replaying every matching letter stopped at a failure; `done` were replayed before it.
    #[error("replaying stopped after {done}; replaying again is safe")]
    Interrupted {
        done: ReplaySummary,
        #[source]
        source: PgInboxError,
    },
}

const LETTER: &str = "SELECT payload FROM dead_letters \
     WHERE topic = $1 AND kafka_partition = $2 AND kafka_offset = $3";

const RECORD_REPLAY: &str = "UPDATE dead_letters \
     SET state = $4, replayed_at = now(), replayed_by = $5, replay_message = $6 \
     WHERE topic = $1 AND kafka_partition = $2 AND kafka_offset = $3";

/// Replays one dead letter as `by` (the audit trail's name for the operator).
pub async fn replay(
    pool: &Pool,
    id: &LetterId,
    by: &str,
    max_payload_bytes: usize,
) -> Result<Replayed, ReplayError> {
    let client = pool
        .get()
        .await
        .map_err(|e| ReplayError::Database(PgInboxError::Pool(e)))?;
    let database = |e: tokio_postgres::Error| ReplayError::Database(PgInboxError::Db(e));
    let statement = client.prepare_cached(LETTER).await.map_err(database)?;
    let row = client
        .query_opt(&statement, &[&id.topic, &id.partition, &id.offset])
        .await
        .map_err(database)?
        .ok_or_else(|| ReplayError::NotFound {
            topic: id.topic.clone(),
            partition: id.partition,
            offset: id.offset,
        })?;
    drop(client);
    let payload: Option<Vec<u8>> = row.get(0);
    replay_payload(pool, id, payload.as_deref(), by, max_payload_bytes).await
}

/// Replays the letter `id` whose raw record is `payload` and records what became of it.
async fn replay_payload(
    pool: &Pool,
    id: &LetterId,
    payload: Option<&[u8]>,
    by: &str,
    max_payload_bytes: usize,
) -> Result<Replayed, ReplayError> {
    let database = |e: tokio_postgres::Error| ReplayError::Database(PgInboxError::Db(e));
    let replayed = match TicketEvent::parse(payload.unwrap_or(b""), max_payload_bytes) {
        Err(rejection) => Replayed::StillRejected(rejection.to_string()),
        Ok(event) => {
            let origin = Origin {
                partition: id.partition,
                offset: id.offset,
            };
            let mut repo = PgInbox::new(pool.clone());
            match process_history_once(&mut repo, &event, origin).await {
                Processed::Applied => Replayed::Applied,
                Processed::AlreadyApplied => Replayed::AlreadyApplied,
                Processed::Unknown(error) if error.rejects_the_row() => {
                    Replayed::StillRejected(error.text())
                }
                Processed::Unknown(error) => return Err(ReplayError::Database(error)),
            }
        }
    };
    let client = pool
        .get()
        .await
        .map_err(|e| ReplayError::Database(PgInboxError::Pool(e)))?;
    let statement = client
        .prepare_cached(RECORD_REPLAY)
        .await
        .map_err(database)?;
    client
        .execute(
            &statement,
            &[
                &id.topic,
                &id.partition,
                &id.offset,
                &replayed.state().as_str(),
                &by,
                &replayed.message(),
            ],
        )
        .await
        .map_err(database)?;
    Ok(replayed)
}

/// Letters of a selection not applied yet, oldest first, after a keyset position.
const MATCHING: &str = concat!(
    "SELECT topic, kafka_partition, kafka_offset, dead_lettered_at, payload \
     FROM dead_letters WHERE ",
    selected_letters!(),
    " AND state <> 'applied' \
       AND ($6::timestamptz IS NULL \
            OR (dead_lettered_at, kafka_partition, kafka_offset, topic) > ($6, $7, $8, $9)) \
     ORDER BY dead_lettered_at, kafka_partition, kafka_offset, topic LIMIT $10"
);

/// How many letters one page of [`replay_matching`] reads.
const PAGE: i64 = 100;

/// Replays, oldest first, up to `limit` letters of `selection` that are not applied yet (new or
/// still rejected), each through its own inbox transaction, as `by`. Stops at the first
/// failure that may pass.
pub async fn replay_matching(
    pool: &Pool,
    selection: &Selection,
    by: &str,
    max_payload_bytes: usize,
    limit: u64,
) -> Result<ReplaySummary, ReplayError> {
    let mut done = ReplaySummary::default();
    let mut after: Option<(DateTime<Utc>, i32, i64, String)> = None;
    loop {
        let page = matching(pool, selection, after.as_ref()).await;
        let page = page.map_err(|source| ReplayError::Interrupted { done, source })?;
        let full = page.len() as i64 == PAGE;
        for (id, at, payload) in page {
            if done.replayed() == limit {
                done.more = true;
                return Ok(done);
            }
            match replay_payload(pool, &id, payload.as_deref(), by, max_payload_bytes).await {
                Ok(replayed) => done.count(&replayed),
                Err(ReplayError::Database(source)) => {
                    return Err(ReplayError::Interrupted { done, source });
                }
                Err(other) => return Err(other),
            }
            after = Some((at, id.partition, id.offset, id.topic));
        }
        if !full {
            return Ok(done);
        }
    }
}

async fn matching(
    pool: &Pool,
    selection: &Selection,
    after: Option<&(DateTime<Utc>, i32, i64, String)>,
) -> Result<Vec<(LetterId, DateTime<Utc>, Option<Vec<u8>>)>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(MATCHING).await?;
    let bound = selection.bound();
    let after_at = after.map(|a| a.0);
    let after_partition = after.map(|a| a.1);
    let after_offset = after.map(|a| a.2);
    let after_topic = after.map(|a| a.3.as_str());
    let mut params = bound.params().to_vec();
    params.extend_from_slice(&[
        &after_at,
        &after_partition,
        &after_offset,
        &after_topic,
        &PAGE,
    ]);
    let rows = client.query(&statement, &params).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let id = LetterId {
                topic: row.get(0),
                partition: row.get(1),
                offset: row.get(2),
            };
            (id, row.get(3), row.get(4))
        })
        .collect())
}
