//! Every message exchanged by the actors and the Kafka driver thread, one struct each.
//!
//! Data paths (records, outcomes) are small and frequent; control messages (assignment,
//! revocation, drain, status, operator actions) carry a reply.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use actix::prelude::*;
use rdkafka::message::OwnedMessage;

use super::status::{CheckpointStatus, PartitionStatus, ServiceStatus};

/// One record of the partition, from the Kafka driver thread to its partition actor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Record(pub OwnedMessage);

/// How the driver thread hands records to a partition actor: the actor's recipient and the
/// count of records sent but not yet taken up (the driver pauses the partition at a bound).
#[derive(Clone)]
pub struct PartitionRoute {
    pub partition: i32,
    pub recipient: Recipient<Record>,
    pub queued: Arc<AtomicUsize>,
}

/// The group assigned partitions to this member; the reply routes their records. Sent from
/// inside librdkafka's rebalance callback, before fetching starts.
#[derive(Message)]
#[rtype(result = "Vec<PartitionRoute>")]
pub struct PartitionsAssigned {
    pub partitions: Vec<i32>,
}

/// The group takes partitions away (or they were lost). The reply comes once their actors
/// drained, with the final positions to commit before librdkafka gives them up.
#[derive(Message)]
#[rtype(result = "Vec<(i32, i64)>")]
pub struct PartitionsRevoked {
    pub partitions: Vec<i32>,
    pub lost: bool,
}

/// Offsets librdkafka reported in its statistics for the assigned partitions.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct OffsetsObserved {
    pub partitions: Vec<ObservedOffsets>,
}

/// One partition's offsets from librdkafka statistics (`-1` when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ObservedOffsets {
    pub partition: i32,
    /// The high watermark: the offset the next produced record will get.
    pub high_watermark: i64,
    /// The last stable offset (read_committed consumers stop there).
    pub last_stable: i64,
    /// The committed offset as the broker knows it.
    pub committed: i64,
}

/// The first outcome of a record, reported in offset order by its partition actor.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct OutcomeReported {
    pub partition: i32,
    pub offset: i64,
    pub resolved: bool,
}

/// A record that was Unknown resolved on a retry.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct BacklogResolved {
    pub partition: i32,
    pub offset: i64,
}

/// The consumer's position is past offsets that hold no record (transaction markers, aborted
/// records) after the last record the driver delivered.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct GapObserved {
    pub partition: i32,
    pub last_delivered: i64,
    pub position: i64,
}

/// The checkpoint starts a fresh watermark for these partitions.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TrackPartitions {
    pub partitions: Vec<i32>,
}

/// The checkpoint forgets these partitions; the reply holds the positions still to commit.
#[derive(Message)]
#[rtype(result = "Vec<(i32, i64)>")]
pub struct ReleasePartitions {
    pub partitions: Vec<i32>,
}

/// The result of an offset commit, from librdkafka's commit callback.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct CommitCompleted {
    pub offsets: Vec<(i32, i64)>,
    pub error: Option<String>,
}

/// Time for the checkpoint to commit the watermarks that moved.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CommitTick;

/// Stop taking records, finish the transaction in flight, then reply (at the latest at
/// `deadline`). The actor stops after replying.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain {
    pub deadline: Instant,
}

/// A partition actor's snapshot.
#[derive(Message)]
#[rtype(result = "PartitionStatus")]
pub struct GetPartitionStatus;

/// The checkpoint's per-partition snapshot.
#[derive(Message)]
#[rtype(result = "Vec<CheckpointStatus>")]
pub struct GetCheckpointStatus;

/// The monitor's overview: the service's snapshot with stuck states, lag in seconds and trends.
#[derive(Message)]
#[rtype(result = "Option<super::monitor::Overview>")]
pub struct GetOverview;

/// The whole service's snapshot (the supervisor asks the others).
#[derive(Message)]
#[rtype(result = "ServiceStatus")]
pub struct GetStatus;

/// An operator action on one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionAction {
    /// Retry every Unknown record now instead of at its backoff time.
    RetryNow,
    /// Stop taking new records (retries of the backlog go on).
    Pause,
    /// Take new records again.
    Resume,
}

impl PartitionAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PartitionAction::RetryNow => "retry_now",
            PartitionAction::Pause => "pause",
            PartitionAction::Resume => "resume",
        }
    }
}

/// Applies an operator action to a partition actor.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct ApplyAction(pub PartitionAction);

/// Asks the supervisor to apply an action to a partition it owns.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), NotOwned>")]
pub struct PartitionCommand {
    pub partition: i32,
    pub action: PartitionAction,
}

/// The partition is not assigned to this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("partition {0} is not assigned to this instance")]
pub struct NotOwned(pub i32);

/// Leave the group gracefully: drain, commit, stop.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// The Kafka driver thread has left the group and closed the consumer.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DriverStopped {
    pub error: Option<String>,
}

/// The member id librdkafka got from the group coordinator.
#[derive(Message)]
#[rtype(result = "()")]
pub struct GroupJoined {
    pub member_id: String,
}
