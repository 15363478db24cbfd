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
    let failed = PgInboxError::at(Step::InsertDeadLetter);
    let statement = client
        .prepare_cached(STORE_DEAD_LETTERS)
        .await
        .map_err(failed)?;
    // The batch's statement with arrays of one.
    let inserted = client
        .execute(
            &statement,
            &[
                &[letter.topic.as_str()].as_slice(),
                &[letter.partition].as_slice(),
                &[letter.offset].as_slice(),
                &[letter.key.as_deref()].as_slice(),
                &[letter.payload.as_deref()].as_slice(),
                &[letter.rejection.reason.as_str()].as_slice(),
                &[letter.rejection.message.as_str()].as_slice(),
            ],
        )
        .await
        .map_err(PgInboxError::at(Step::InsertDeadLetter))?;
    Ok(inserted == 1)
}
