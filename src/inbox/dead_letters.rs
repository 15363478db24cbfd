//! The `dead_letters` table: records that can never succeed, stored with their position, raw
//! bytes and the reason, idempotently on (topic, partition, offset).

use deadpool_postgres::Pool;

use super::PgInboxError;
use super::sqlstate::Step;
use crate::domain::DeadLetter;

const STORE: &str = "INSERT INTO dead_letters \
     (topic, kafka_partition, kafka_offset, record_key, payload, reason, message) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (topic, kafka_partition, kafka_offset) DO NOTHING";

/// Stores a dead letter; storing the same position twice is a no-op.
pub async fn store(pool: &Pool, letter: &DeadLetter) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let failed = PgInboxError::at(Step::InsertDeadLetter);
    let statement = client.prepare_cached(STORE).await.map_err(failed)?;
    client
        .execute(
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
    Ok(())
}
