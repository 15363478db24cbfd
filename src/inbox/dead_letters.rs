//! The `dead_letters` table: records that can never succeed, stored with their position, raw
//! bytes and the reason, idempotently on (topic, partition, offset).

use deadpool_postgres::{Object, Pool};

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
    let failed = PgInboxError::at(Step::InsertDeadLetter);
    let statement = client
        .prepare_cached(STORE_DEAD_LETTERS)
        .await
        .map_err(failed)?;
    client
        .execute(
            &statement,
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
