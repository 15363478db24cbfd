//! Snapshots the actors describe themselves with: cheap, serialisable, rendered by the admin
//! page and asserted on by tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::Trouble;
use crate::domain::{ConnectionStatus, DuplicateCause, ObservedOffsets, UnknownCause};
use crate::stuck::StuckReason;

/// What a partition actor is doing, as an operator would say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum PartitionState {
    /// Taking records and resolving them.
    Running,
    /// Unknown records wait for a retry; new records go on.
    Retrying,
    /// The Unknown backlog reached its bound: no new records until it shrinks.
    BacklogFull,
    /// An operator paused it: no new records (retries go on). The pause belongs to this
    /// instance and survives the partition being revoked and assigned back to it.
    Paused,
    /// Revoked or shutting down: finishing the transaction in flight.
    Draining,
}

impl PartitionState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Counts of outcomes since the partition was assigned to this instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutcomeCounts {
    pub applied: u64,
    pub already_applied: u64,
    pub dead_lettered: u64,
    /// Attempts that ended Unknown (a record retried three times counts three).
    pub unknown_attempts: u64,
    pub duplicates: BTreeMap<DuplicateCause, u64>,
    pub dead_letters: BTreeMap<String, u64>,
}

impl OutcomeCounts {
    pub fn duplicates_of(&self, cause: DuplicateCause) -> u64 {
        self.duplicates.get(&cause).copied().unwrap_or(0)
    }
}

/// One Unknown record waiting for a retry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BacklogEntry {
    pub offset: i64,
    /// `None` for a dead letter whose storing failed.
    pub event_id: Option<String>,
    pub attempts: u32,
    /// Why its last attempt was Unknown.
    pub cause: UnknownCause,
    /// Shared with the backlog entry (and the other records of its failed batch): a snapshot
    /// of a full backlog copies no error text.
    pub last_error: Arc<str>,
    pub first_seen: DateTime<Utc>,
    pub next_retry: DateTime<Utc>,
    /// An operator asked to dead-letter it; that runs next.
    pub dead_letter_requested: bool,
}

/// The partition's guard against mass dead-lettering (see `partition::guard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GuardStatus {
    /// Dead-lettering of records the database rejects is stopped.
    pub engaged: bool,
    /// Records rejected by the database in a row.
    pub consecutive: usize,
    /// How many in a row may be dead-lettered (`--max-consecutive-rejections`).
    pub limit: u32,
    /// Records of the run dead-lettered, by this owner of the partition or an earlier one (the
    /// guard is kept in the database, `partition_guards`).
    pub dead_lettered: u32,
    /// Since when dead-lettering is stopped, as the database says.
    pub engaged_at: Option<DateTime<Utc>>,
    /// Whether the guard was read from the database yet (it is read when the actor starts).
    pub known: bool,
}

/// A recently resolved or failed record, newest first in snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecentOutcome {
    pub offset: i64,
    pub event_id: Option<String>,
    pub outcome: crate::domain::Outcome,
    pub duplicate: Option<DuplicateCause>,
    pub detail: Option<String>,
    pub at: DateTime<Utc>,
}

/// How much of each partition's Unknown backlog a snapshot copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BacklogDetail {
    /// Every entry: the admin pages and the API show them.
    Entries,
    /// Its size and its oldest entry's age only: the monitor samples every partition every
    /// second, and a copy of every entry of 64 partitions at their bound is ~9 MB each time.
    Summary,
}

/// A partition actor's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionStatus {
    pub partition: i32,
    /// Which assignment of the partition this actor serves.
    pub generation: u64,
    pub state: PartitionState,
    pub operator_paused: bool,
    /// Records handed over by the driver and not yet resolved for the first time.
    pub in_flight: usize,
    /// Records asked of the driver and not received yet (librdkafka has not fetched them, or
    /// they are on their way).
    pub requested: usize,
    /// Unknown records held: the backlog's size, also when its entries were not copied.
    pub unknown: usize,
    /// When the oldest of them first came back Unknown.
    pub oldest_unknown_since: Option<DateTime<Utc>>,
    /// Every Unknown record, lowest offset first; empty in a [`BacklogDetail::Summary`]
    /// snapshot.
    pub backlog: Vec<BacklogEntry>,
    pub guard: GuardStatus,
    pub counts: OutcomeCounts,
    pub last_offset: Option<i64>,
    /// Kafka timestamp of the last record taken up.
    pub last_record_time: Option<DateTime<Utc>>,
    pub recent: Vec<RecentOutcome>,
}

/// The checkpoint's view of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointStatus {
    pub partition: i32,
    /// Which assignment of the partition this member holds (see `Assignment`).
    pub generation: u64,
    /// The position that may be committed: last contiguous resolved offset + 1.
    pub watermark: Option<i64>,
    /// The last position this instance committed successfully.
    pub committed: Option<i64>,
    pub unresolved: usize,
    pub first_unresolved: Option<i64>,
    pub commits_ok: u64,
    pub commits_failed: u64,
    pub last_commit_error: Option<String>,
}

/// Everything known about one assigned partition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionView {
    pub partition: i32,
    pub actor: Option<PartitionStatus>,
    pub checkpoint: Option<CheckpointStatus>,
    pub observed: Option<ObservedOffsets>,
    /// What reading it ran into, as the driver thread reported it.
    pub fetch: Option<Trouble>,
}

impl PartitionView {
    /// The committed offset: ours if we committed, else what the broker reported.
    pub fn committed(&self) -> Option<i64> {
        self.checkpoint
            .as_ref()
            .and_then(|c| c.committed)
            .or_else(|| self.observed.map(|o| o.committed).filter(|c| *c >= 0))
    }

    /// The end of the partition (the last stable offset for a read_committed consumer), at
    /// least: librdkafka's statistics are up to a second old, and records resolved since then
    /// prove the partition reaches further, so the watermark and the committed offset bound it
    /// from below. `None` until the statistics came once.
    pub fn end(&self) -> Option<i64> {
        let reported = self
            .observed
            .map(|o| {
                if o.last_stable >= 0 {
                    o.last_stable
                } else {
                    o.high_watermark
                }
            })
            .filter(|e| *e >= 0)?;
        let ours = self.checkpoint.as_ref().and_then(|c| c.watermark);
        Some(
            reported
                .max(ours.unwrap_or(0))
                .max(self.committed().unwrap_or(0)),
        )
    }

    /// Records between the committed offset and the end of the partition.
    pub fn lag(&self) -> Option<i64> {
        Some((self.end()? - self.committed().unwrap_or(0)).max(0))
    }
}

/// The service's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceStatus {
    pub group: String,
    pub topic: String,
    pub member_id: Option<String>,
    pub host: String,
    pub started_at: DateTime<Utc>,
    pub shutting_down: bool,
    pub partitions: Vec<PartitionView>,
}

// ----- the monitor's view: derived states, lag in seconds, trends --------------------------

/// What an operator is told a partition is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum DisplayState {
    Running,
    Retrying,
    Paused,
    Stuck,
    Draining,
}

impl DisplayState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a partition is in its [`DisplayState`], for the paused and stuck ones. The monitor
/// decides which; the words an operator reads (in pages, and as a string in the JSON API) are
/// the admin's (`admin::wording`), except a stuck partition's, which are the stuck rules' own
/// and travel to the other members of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateReason {
    /// What the stuck rules found, with what fetching says about it.
    Stuck(String),
    /// An operator paused it.
    PausedByOperator,
    /// Its backlog of Unknown records is at its bound, so new records wait.
    BacklogAtBound,
}

/// One point of a partition's trend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrendPoint {
    pub at: DateTime<Utc>,
    pub lag: i64,
    /// Records resolved per second since the previous point.
    pub per_second: f64,
}

/// A partition with everything derived from its snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionSummary {
    #[serde(flatten)]
    pub view: PartitionView,
    pub state: DisplayState,
    /// Why the state is what it is (for paused and stuck).
    pub state_reason: Option<StateReason>,
    pub stuck: Option<StuckReason>,
    /// The end of the partition, at least ([`PartitionView::end`]): what pages and the API show
    /// beside the watermark, never below it (`observed` keeps librdkafka's own figures).
    pub end: Option<i64>,
    /// Records between the committed offset and [`PartitionSummary::end`].
    pub lag: Option<i64>,
    pub lag_seconds: Option<f64>,
    pub oldest_unknown_seconds: Option<f64>,
    pub trend: Vec<TrendPoint>,
}

/// The service with its partitions, stuck ones first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    pub group: String,
    pub topic: String,
    pub member_id: Option<String>,
    pub host: String,
    pub started_at: DateTime<Utc>,
    pub uptime_seconds: u64,
    pub shutting_down: bool,
    /// Whether the Kafka connection fails, and why (then nothing is read or committed).
    pub kafka_connection: ConnectionStatus,
    pub partitions: Vec<PartitionSummary>,
}

impl Overview {
    pub fn partition(&self, partition: i32) -> Option<&PartitionSummary> {
        self.partitions
            .iter()
            .find(|p| p.view.partition == partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(reported_end: i64, watermark: Option<i64>, committed: Option<i64>) -> PartitionView {
        PartitionView {
            partition: 0,
            actor: None,
            checkpoint: Some(CheckpointStatus {
                partition: 0,
                generation: 1,
                watermark,
                committed,
                unresolved: 0,
                first_unresolved: None,
                commits_ok: 0,
                commits_failed: 0,
                last_commit_error: None,
            }),
            observed: Some(ObservedOffsets {
                partition: 0,
                high_watermark: reported_end,
                last_stable: reported_end,
                committed: -1,
                observed_at: Utc::now(),
            }),
            fetch: None,
        }
    }

    #[test]
    fn the_end_of_a_partition_is_never_below_what_was_resolved_or_committed() {
        // Statistics a second old: 120 records then, 150 resolved since.
        let stale = view(120, Some(150), Some(140));
        assert_eq!(stale.end(), Some(150));
        assert_eq!(stale.lag(), Some(10));
        let fresh = view(200, Some(150), Some(140));
        assert_eq!(fresh.end(), Some(200));
        assert_eq!(fresh.lag(), Some(60));
        let unknown = PartitionView {
            observed: None,
            ..view(0, Some(5), Some(5))
        };
        assert_eq!(
            unknown.end(),
            None,
            "no statistics yet: unknown, not guessed"
        );
    }
}
