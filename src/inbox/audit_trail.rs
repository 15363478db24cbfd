//! The audit trail (`admin_actions`): what operators did, from the admin pages and from the
//! `rewind` command, written here only. The admin pages read it (`admin::queries`).

use deadpool_postgres::Pool;

use super::PgInboxError;

/// An operator action for the audit trail.
#[derive(Debug, Clone, Copy)]
pub struct Action<'a> {
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    pub action: &'a str,
    pub actor: &'a str,
    pub result: &'a str,
    pub detail: Option<&'a str>,
}

const RECORD: &str = "INSERT INTO admin_actions \
     (kafka_partition, kafka_offset, action, actor, result, detail) \
     SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[], $5::text[], \
                          $6::text[]) \
     RETURNING id";

const SETTLE: &str = "UPDATE admin_actions SET result = $2 WHERE id = $1";

/// Appends an operator action to the audit trail; its id.
pub async fn record(pool: &Pool, action: &Action<'_>) -> Result<i64, PgInboxError> {
    let ids = insert(pool, std::slice::from_ref(action)).await?;
    ids.first()
        .copied()
        .ok_or(PgInboxError::Misuse("the audit trail returned no id"))
}

/// Appends several actions (a rewind's partitions) in one statement.
pub async fn record_all(pool: &Pool, actions: &[Action<'_>]) -> Result<(), PgInboxError> {
    if !actions.is_empty() {
        insert(pool, actions).await?;
    }
    Ok(())
}

async fn insert(pool: &Pool, actions: &[Action<'_>]) -> Result<Vec<i64>, PgInboxError> {
    let partitions: Vec<Option<i32>> = actions.iter().map(|a| a.partition).collect();
    let offsets: Vec<Option<i64>> = actions.iter().map(|a| a.offset).collect();
    let names: Vec<&str> = actions.iter().map(|a| a.action).collect();
    let actors: Vec<&str> = actions.iter().map(|a| a.actor).collect();
    let results: Vec<&str> = actions.iter().map(|a| a.result).collect();
    let details: Vec<Option<&str>> = actions.iter().map(|a| a.detail).collect();
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(RECORD).await?;
    let rows = client
        .query(
            &statement,
            &[&partitions, &offsets, &names, &actors, &results, &details],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Records the result of an action whose outcome came after it was recorded (a skip that had
/// not run when its operator was answered).
pub async fn settle(pool: &Pool, id: i64, result: &str) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(SETTLE).await?;
    client.execute(&statement, &[&id, &result]).await?;
    Ok(())
}
