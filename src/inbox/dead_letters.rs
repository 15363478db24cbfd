//! The `dead_letters` table: records that can never succeed, stored with their position, raw
//! bytes and the reason, idempotently on (topic, partition, offset).

use deadpool_postgres::{Object, Pool};
use tokio_postgres::Statement;

use super::PgInboxError;
use super::sqlstate::Step;
use super::statements::STORE_DEAD_LETTERS;
use crate::domain::DeadLetter;

/// Stores a dead letter; storing the same position twice is a no-op.
pub async fn store(pool: &Pool, letter: &DeadLetter) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    insert(&client, letter).await?;
    Ok(())
}

/// Inserts a dead letter on `client` (inside the caller's transaction, if any): true if it is
/// new, false if its position held a letter already.
pub async fn insert(client: &Object, letter: &DeadLetter) -> Result<bool, PgInboxError> {
    Ok(insert_all(client, &[letter]).await? == 1)
}

/// Inserts `letters` on `client` in one statement; how many were new.
pub async fn insert_all(client: &Object, letters: &[&DeadLetter]) -> Result<u64, PgInboxError> {
    let statement = prepare(client).await?;
    insert_prepared(client, &statement, letters).await
}

/// The insert's statement, prepared on `client` (cached there).
pub async fn prepare(client: &Object) -> Result<Statement, PgInboxError> {
    client
        .prepare_cached(STORE_DEAD_LETTERS)
        .await
        .map_err(PgInboxError::at(Step::InsertDeadLetter))
}

/// Inserts `letters` through `statement` (from [`prepare`] on `client`). Encodes and sends the
/// statement before it first waits, as a pipelined commit needs (see `inbox::batch`).
pub async fn insert_prepared(
    client: &Object,
    statement: &Statement,
    letters: &[&DeadLetter],
) -> Result<u64, PgInboxError> {
    let topics: Vec<&str> = letters.iter().map(|l| l.topic.as_str()).collect();
    let partitions: Vec<i32> = letters.iter().map(|l| l.partition).collect();
    let offsets: Vec<i64> = letters.iter().map(|l| l.offset).collect();
    let keys: Vec<Option<&[u8]>> = letters.iter().map(|l| l.key.as_deref()).collect();
    let payloads: Vec<Option<&[u8]>> = letters.iter().map(|l| l.payload.as_deref()).collect();
    let reasons: Vec<&str> = letters
        .iter()
        .map(|l| l.rejection.reason.as_str())
        .collect();
    let messages: Vec<&str> = letters
        .iter()
        .map(|l| l.rejection.message.as_str())
        .collect();
    client
        .execute(
            statement,
            &[
                &topics,
                &partitions,
                &offsets,
                &keys,
                &payloads,
                &reasons,
                &messages,
            ],
        )
        .await
        .map_err(PgInboxError::at(Step::InsertDeadLetter))
}
