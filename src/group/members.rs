//! The members' rows in the shared database (`group_members`, `group_member_partitions`): what a
//! member publishes about itself and its partitions every heartbeat, what any member reads back
//! about the whole group, a graceful leave, and forgetting members gone for long.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

use super::identity::MemberIdentity;
use crate::actors::status::{PartitionSummary, StateReason};
use crate::inbox::PgInboxError;

/// One partition as its owner reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionReport {
    pub partition: i32,
    /// `running`, `retrying`, `paused`, `stuck`, `draining` (the owner's overview).
    pub state: String,
    pub watermark: Option<i64>,
    pub committed: Option<i64>,
    pub end: Option<i64>,
    pub lag_records: Option<i64>,
    pub lag_seconds: Option<f64>,
    /// Unknown records waiting for a retry.
    pub unknown: i32,
    /// Why the partition is stuck, in words (`None`: it is not).
    pub stuck_reason: Option<String>,
    /// An operator paused it on its owner.
    pub paused: bool,
    /// Its guard against mass dead-lettering is engaged.
    pub guard_engaged: bool,
    /// The member's own count of the times it was given the partition.
    pub generation: Option<i64>,
}

impl PartitionReport {
    /// The report of a partition summarised by this member's monitor.
    pub fn of(summary: &PartitionSummary) -> PartitionReport {
        let view = &summary.view;
        let actor = view.actor.as_ref();
        PartitionReport {
            partition: view.partition,
            state: summary.state.as_str().to_owned(),
            watermark: view.checkpoint.as_ref().and_then(|c| c.watermark),
            committed: view.committed(),
            end: summary.end,
            lag_records: summary.lag,
            lag_seconds: summary.lag_seconds,
            unknown: actor.map_or(0, |a| i32::try_from(a.unknown).unwrap_or(i32::MAX)),
            stuck_reason: match &summary.state_reason {
                Some(StateReason::Stuck(text)) => Some(text.clone()),
                _ => None,
            },
            paused: actor.is_some_and(|a| a.operator_paused),
            guard_engaged: actor.is_some_and(|a| a.guard.engaged),
            generation: generation_of(view),
        }
    }
}

/// A member as the database has it.
/// The generation of a partition as its owner counts it (the actor's, else its checkpoint's).
pub fn generation_of(view: &crate::actors::status::PartitionView) -> Option<i64> {
    view.actor
        .as_ref()
        .map(|a| a.generation)
        .or_else(|| view.checkpoint.as_ref().map(|c| c.generation))
        .and_then(|g| i64::try_from(g).ok())
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberRow {
    pub id: String,
    pub host: String,
    pub pid: i32,
    pub version: String,
    pub client_id: String,
    /// The member id the group coordinator gave it (`None`: it had not joined yet).
    pub kafka_member_id: Option<String>,
    pub admin_url: Option<String>,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    /// Seconds since its last heartbeat, by the database's clock.
    pub heartbeat_age_seconds: f64,
    /// It left the group gracefully.
    pub left: bool,
    pub partitions: Vec<PartitionReport>,
}

impl MemberRow {
    /// Whether the member is alive: it has not left, and its last heartbeat is younger than
    /// `gone_after`.
    pub fn alive(&self, gone_after: Duration) -> bool {
        !self.left && self.heartbeat_age_seconds < gone_after.as_secs_f64()
    }
}

const UPSERT_MEMBER: &str = "INSERT INTO group_members (member_id, consumer_group, topic, host, \
     pid, version, client_id, kafka_member_id, admin_url, started_at, heartbeat_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now()) \
     ON CONFLICT (member_id) DO UPDATE SET kafka_member_id = EXCLUDED.kafka_member_id, \
       admin_url = EXCLUDED.admin_url, heartbeat_at = now(), left_at = NULL";

const DROP_PARTITIONS: &str = "DELETE FROM group_member_partitions \
     WHERE member_id = $1 AND kafka_partition <> ALL($2::int[])";

const UPSERT_PARTITIONS: &str = "INSERT INTO group_member_partitions (member_id, \
       kafka_partition, state, watermark, committed_offset, end_offset, lag_records, lag_seconds, \
       unknown_records, stuck_reason, paused, guard_engaged, generation) \
     SELECT $1::text, t.* FROM unnest($2::int[], $3::text[], $4::bigint[], $5::bigint[], \
       $6::bigint[], $7::bigint[], $8::float8[], $9::int[], $10::text[], $11::bool[], \
       $12::bool[], $13::bigint[]) AS t \
     ON CONFLICT (member_id, kafka_partition) DO UPDATE SET state = EXCLUDED.state, \
       watermark = EXCLUDED.watermark, committed_offset = EXCLUDED.committed_offset, \
       end_offset = EXCLUDED.end_offset, lag_records = EXCLUDED.lag_records, \
       lag_seconds = EXCLUDED.lag_seconds, unknown_records = EXCLUDED.unknown_records, \
       stuck_reason = EXCLUDED.stuck_reason, paused = EXCLUDED.paused, \
       guard_engaged = EXCLUDED.guard_engaged, generation = EXCLUDED.generation";

/// Publishes this member and its partitions in one transaction: the member's heartbeat, the
/// rows of the partitions it owns, none of the ones it no longer owns.
pub async fn publish(
    pool: &Pool,
    member: &MemberIdentity,
    started_at: DateTime<Utc>,
    kafka_member_id: Option<&str>,
    partitions: &[PartitionReport],
) -> Result<(), PgInboxError> {
    let mut client = pool.get().await.map_err(PgInboxError::Pool)?;
    let transaction = client.transaction().await?;
    let pid = i32::try_from(member.pid).unwrap_or(i32::MAX);
    let upsert = transaction.prepare_cached(UPSERT_MEMBER).await?;
    transaction
        .execute(
            &upsert,
            &[
                &member.id,
                &member.group,
                &member.topic,
                &member.host,
                &pid,
                &member.version,
                &member.client_id,
                &kafka_member_id,
                &member.admin_url,
                &started_at,
            ],
        )
        .await?;
    let numbers: Vec<i32> = partitions.iter().map(|p| p.partition).collect();
    let drop = transaction.prepare_cached(DROP_PARTITIONS).await?;
    transaction.execute(&drop, &[&member.id, &numbers]).await?;
    if !partitions.is_empty() {
        let column = |f: fn(&PartitionReport) -> Option<i64>| -> Vec<Option<i64>> {
            partitions.iter().map(f).collect()
        };
        let states: Vec<&str> = partitions.iter().map(|p| p.state.as_str()).collect();
        let lag_seconds: Vec<Option<f64>> = partitions.iter().map(|p| p.lag_seconds).collect();
        let unknown: Vec<i32> = partitions.iter().map(|p| p.unknown).collect();
        let stuck: Vec<Option<&str>> = partitions
            .iter()
            .map(|p| p.stuck_reason.as_deref())
            .collect();
        let paused: Vec<bool> = partitions.iter().map(|p| p.paused).collect();
        let guard: Vec<bool> = partitions.iter().map(|p| p.guard_engaged).collect();
        let upsert = transaction.prepare_cached(UPSERT_PARTITIONS).await?;
        transaction
            .execute(
                &upsert,
                &[
                    &member.id,
                    &numbers,
                    &states,
                    &column(|p| p.watermark),
                    &column(|p| p.committed),
                    &column(|p| p.end),
                    &column(|p| p.lag_records),
                    &lag_seconds,
                    &unknown,
                    &stuck,
                    &paused,
                    &guard,
                    &column(|p| p.generation),
                ],
            )
            .await?;
    }
    transaction.commit().await?;
    Ok(())
}

const LEAVE: &str = "WITH gone AS (DELETE FROM group_member_partitions WHERE member_id = $1) \
     UPDATE group_members SET left_at = now() WHERE member_id = $1";

/// Records that this member left the group gracefully (it owns no partition any more).
pub async fn leave(pool: &Pool, member_id: &str) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(LEAVE).await?;
    client.execute(&statement, &[&member_id]).await?;
    Ok(())
}

const FORGET_MEMBERS: &str =
    "DELETE FROM group_members WHERE heartbeat_at < now() - make_interval(secs => $1)";
const FORGET_COMMANDS: &str =
    "DELETE FROM group_commands WHERE created_at < now() - make_interval(secs => $1)";

/// Removes the members whose last heartbeat is older than `after` (their partitions with them)
/// and the commands older than that; how many of each.
pub async fn forget(pool: &Pool, after: Duration) -> Result<(u64, u64), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let seconds = after.as_secs_f64();
    let members = client.prepare_cached(FORGET_MEMBERS).await?;
    let members = client.execute(&members, &[&seconds]).await?;
    let commands = client.prepare_cached(FORGET_COMMANDS).await?;
    let commands = client.execute(&commands, &[&seconds]).await?;
    Ok((members, commands))
}

const GROUP_MEMBERS: &str = "SELECT member_id, host, pid, version, client_id, kafka_member_id, \
       admin_url, started_at, heartbeat_at, \
       extract(epoch FROM now() - heartbeat_at)::float8, left_at IS NOT NULL \
     FROM group_members WHERE consumer_group = $1 AND topic = $2 \
     ORDER BY started_at, member_id";

const GROUP_PARTITIONS: &str = "SELECT p.member_id, p.kafka_partition, p.state, p.watermark, \
       p.committed_offset, p.end_offset, p.lag_records, p.lag_seconds, p.unknown_records, \
       p.stuck_reason, p.paused, p.guard_engaged, p.generation \
     FROM group_member_partitions p JOIN group_members m USING (member_id) \
     WHERE m.consumer_group = $1 AND m.topic = $2 ORDER BY p.kafka_partition";

/// Every member of `group` on `topic` the database knows, oldest first, with its partitions.
pub async fn read(pool: &Pool, group: &str, topic: &str) -> Result<Vec<MemberRow>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let members = client.prepare_cached(GROUP_MEMBERS).await?;
    let mut rows: Vec<MemberRow> = client
        .query(&members, &[&group, &topic])
        .await?
        .iter()
        .map(|row| MemberRow {
            id: row.get(0),
            host: row.get(1),
            pid: row.get(2),
            version: row.get(3),
            client_id: row.get(4),
            kafka_member_id: row.get(5),
            admin_url: row.get(6),
            started_at: row.get(7),
            heartbeat_at: row.get(8),
            heartbeat_age_seconds: row.get::<_, f64>(9).max(0.0),
            left: row.get(10),
            partitions: Vec::new(),
        })
        .collect();
    let partitions = client.prepare_cached(GROUP_PARTITIONS).await?;
    for row in client.query(&partitions, &[&group, &topic]).await? {
        let member: String = row.get(0);
        let Some(owner) = rows.iter_mut().find(|m| m.id == member) else {
            continue;
        };
        owner.partitions.push(PartitionReport {
            partition: row.get(1),
            state: row.get(2),
            watermark: row.get(3),
            committed: row.get(4),
            end: row.get(5),
            lag_records: row.get(6),
            lag_seconds: row.get(7),
            unknown: row.get(8),
            stuck_reason: row.get(9),
            paused: row.get(10),
            guard_engaged: row.get(11),
            generation: row.get(12),
        });
    }
    Ok(rows)
}
