//! The `dead_letters` table: records that can never succeed, stored with their position, raw
//! bytes and the reason, idempotently on (topic, partition, offset).

use deadpool_postgres::{Object, Pool};

use super::PgInboxError;
use super::sqlstate::Step;
use crate::domain::DeadLetter;

const STORE: &str = "INSERT INTO dead_letters \
     (topic, kafka_partition, kafka_offset, record_key, payload, reason, message) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (topic, kafka_partition, kafka_offset) DO NOTHING \
     RETURNING kafka_offset";

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
    let statement = client.prepare_cached(STORE).await.map_err(failed)?;
    let inserted = client
        .query_opt(
            &statement,
            &[
                &letter.topic,
                &letter.partition,
                &letter.offset,
                &letter.key,
                &letter.payload,
                &letter.rejection.reason.as_str(),
                &letter.rejection.message,
            ],
        )
        .await
        .map_err(PgInboxError::at(Step::InsertDeadLetter))?;
    Ok(inserted.is_some())
}
