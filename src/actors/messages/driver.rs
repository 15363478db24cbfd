//! The driver thread's conversation with the actors: records and skipped offsets down to a
//! partition actor, demand and commits up to the driver, the group's rebalances, live rewinds,
//! what reading a partition ran into, and the driver's own end.

use std::sync::mpsc::Sender;

use actix::prelude::*;

use super::commands::LiveRewound;
use crate::domain::offset_reset::OffsetReset;
use crate::domain::rewind::TimeOffset;
use crate::domain::{Assignment, CommitPosition, FetchedRecord, ObservedOffsets, Trouble};

/// From the driver thread to a partition actor, in offset order.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub enum Fetched {
    /// Records, never more than the actor asked for.
    Records(Vec<FetchedRecord>),
    /// The consumer's position moved past offsets that hold no record for us (transaction
    /// markers, aborted records): nothing after `after` (the last record delivered in this
    /// assignment; `None`: none yet) and below `position` is ours to process.
    Skipped { after: Option<i64>, position: i64 },
}

/// What the actors ask of the Kafka driver thread: a plain channel, which librdkafka's queues
/// wake as well, so that no actor ever waits for the driver. The driver waits for actors only
/// where librdkafka's rebalance makes it wait anyway, blocking on their reply: for where to
/// deliver a new assignment's records ([`PartitionsAssigned`], [`PartitionsRestarted`]), for
/// the final positions of revoked partitions ([`PartitionsRevoked`]), and for the drain of a
/// live rewind ([`DrainForRewind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaRequest {
    /// The partition actor has room for this many more records.
    Demand {
        assignment: Assignment,
        records: usize,
    },
    /// Commit these positions (assignments no longer held are skipped).
    Commit(Vec<CommitPosition>),
    /// Rewind these partitions while consuming, as a revoke and re-assign of the same
    /// partitions without a rebalance: drain their actors ([`DrainForRewind`]), wait for the
    /// commit in flight, seek, start new assignments ([`PartitionsRestarted`]), commit the
    /// rewound positions ahead of anything queued, and report [`PartitionsRewound`] with `id`.
    Rewind { id: u64, targets: Vec<RewindTarget> },
    /// The gap of a position out of its log (at `from`) is recorded: read the assignment's
    /// partition on from `at` (`--offset-reset-policy continue`).
    ResumeAfterReset {
        assignment: Assignment,
        from: i64,
        at: i64,
    },
    /// Leave the group: revoke (drain and commit) every partition, then close.
    Shutdown,
    /// A librdkafka queue has something to serve.
    Wake,
}

/// The sending side of the driver thread's channel.
#[derive(Debug, Clone)]
pub struct KafkaLink(Sender<KafkaRequest>);

impl KafkaLink {
    pub fn new(sender: Sender<KafkaRequest>) -> Self {
        KafkaLink(sender)
    }

    /// Sends a request; false when the driver thread is gone (the service is stopping).
    pub fn send(&self, request: KafkaRequest) -> bool {
        self.0.send(request).is_ok()
    }
}

/// The group assigned partitions to this member; the reply is where to deliver their records.
/// Sent by the driver thread before it tells librdkafka to start fetching them.
#[derive(Message)]
#[rtype(result = "Vec<(Assignment, Recipient<Fetched>)>")]
pub struct PartitionsAssigned {
    pub assignments: Vec<Assignment>,
}

/// The group takes partitions away (or they were lost). The reply comes once their actors
/// drained, with the final positions to commit before librdkafka gives them up.
#[derive(Message)]
#[rtype(result = "Vec<CommitPosition>")]
pub struct PartitionsRevoked {
    pub assignments: Vec<Assignment>,
    pub lost: bool,
}

/// A partition to rewind live: the first record at or after the operator's point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewindTarget {
    pub assignment: Assignment,
    pub target: TimeOffset,
}

/// From the driver thread: drain these assignments' actors for a live rewind. The reply comes
/// once they drained, with where reading must resume for each (the first offset not resolved
/// contiguously; `None`: nothing was reported).
#[derive(Message)]
#[rtype(result = "Vec<(Assignment, Option<i64>)>")]
pub struct DrainForRewind {
    pub assignments: Vec<Assignment>,
}

/// From the driver thread: new assignments of partitions this member keeps (a live rewind's
/// restart, not a rebalance); the reply is where to deliver their records.
#[derive(Message)]
#[rtype(result = "Vec<(Assignment, Recipient<Fetched>)>")]
pub struct PartitionsRestarted {
    pub assignments: Vec<Assignment>,
}

/// From the driver thread: the live rewind `id` is done.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PartitionsRewound {
    pub id: u64,
    pub results: Vec<LiveRewound>,
}

/// From the driver thread: what reading an assignment's partition ran into, for its status
/// (`None`: it reads again).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct FetchTrouble {
    pub assignment: Assignment,
    pub trouble: Option<Trouble>,
}

/// From the driver thread: an assignment's position is not in its partition's log (see
/// `domain::offset_reset`). The supervisor records it in `offset_resets` (retrying until the
/// database takes it) and, when `reset.to_offset` is set, has the driver read on from there
/// only then ([`KafkaRequest::ResumeAfterReset`]).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct OffsetResetFound {
    pub assignment: Assignment,
    pub reset: OffsetReset,
}

/// From the driver thread: a held gap's partition reads again from `to` (a live rewind).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct OffsetResetResumed {
    pub partition: i32,
    pub from: i64,
    pub to: i64,
    pub by: &'static str,
}

/// Offsets librdkafka reported in its statistics for the assigned partitions.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct OffsetsObserved {
    pub partitions: Vec<ObservedOffsets>,
}

/// The results of one offset commit, per position (`None`: committed).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct CommitCompleted {
    pub results: Vec<(CommitPosition, Option<String>)>,
}

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
