//! Every message exchanged by the actors and the Kafka driver thread, one struct each.
//!
//! The path of a record: the driver thread reads each assigned partition from its own
//! librdkafka queue and hands the partition actor at most as many records as it asked for
//! ([`Fetched`], [`KafkaRequest::Demand`]); the actor resolves them through the inbox and
//! reports each outcome to the checkpoint ([`OutcomeReported`]); the checkpoint asks the driver
//! to commit watermarks that moved ([`KafkaRequest::Commit`]) and hears back
//! ([`CommitCompleted`]). Nothing else carries records or offsets.
//!
//! Every partition-scoped message names its [`Assignment`], so that a message left over from
//! an earlier assignment of the same partition is recognised and ignored.

use std::sync::mpsc::Sender;
use std::time::Instant;

use actix::prelude::*;
use serde::Serialize;

use super::status::{CheckpointStatus, PartitionStatus, ServiceStatus};
use crate::domain::offset_reset::OffsetReset;
use crate::domain::rewind::{Decision, TimeOffset};
use crate::domain::{FetchedRecord, ObservedOffsets, Outcome, Trouble};
use tokio::sync::oneshot;

/// One assignment of a partition to this member. The generation grows with every assignment
/// this member receives, so a partition revoked and assigned back gets a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Assignment {
    pub partition: i32,
    pub generation: u64,
}

/// A position to commit for an assignment: the next offset to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CommitPosition {
    pub assignment: Assignment,
    pub offset: i64,
}

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

/// What the actors ask of the Kafka driver thread. A plain channel, because the driver is a
/// thread that must never wait on an actor mailbox; librdkafka's queues wake it as well.
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

/// From the admin: rewind these partitions of this instance while consuming. Refused if one
/// of them is not assigned here; the reply comes once every one was restarted.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<LiveRewound>, NotOwned>")]
pub struct RewindPartitions {
    pub targets: Vec<(i32, TimeOffset)>,
}

/// What a live rewind did to one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LiveRewound {
    pub partition: i32,
    /// `None`: the partition was not rewound (see `error`).
    pub decision: Option<Decision>,
    /// Why the rewind did not happen (the partition is shown held with it when it could not
    /// be restarted where it should).
    pub error: Option<String>,
    /// The partition reads from its new position, but the position is not committed yet: why
    /// (it is queued behind an unanswered commit, or its commit failed and is sent again).
    /// Until then a restart would go back to the offset committed before.
    pub pending: Option<String>,
}

impl LiveRewound {
    /// The partition was not rewound, for `why`.
    pub fn failed(partition: i32, why: &str) -> LiveRewound {
        LiveRewound {
            partition,
            decision: None,
            error: Some(why.to_owned()),
            pending: None,
        }
    }
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

/// The first outcomes of records, `(offset, resolved)` in offset order, reported by their
/// partition actor once per unit of work (one message and one watermark publication for a
/// batch, not one per record).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct OutcomesReported {
    pub assignment: Assignment,
    pub outcomes: Vec<(i64, bool)>,
}

/// A record that was Unknown resolved on a retry.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct BacklogResolved {
    pub assignment: Assignment,
    pub offset: i64,
}

/// Offsets without records were skipped (see [`Fetched::Skipped`]), reported by the partition
/// actor after every record before them.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct SkipReported {
    pub assignment: Assignment,
    pub after: Option<i64>,
    pub position: i64,
}

/// The checkpoint starts a fresh watermark for these assignments.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TrackPartitions {
    pub assignments: Vec<Assignment>,
}

/// The checkpoint forgets these assignments for a live rewind; the reply holds where reading
/// must resume for each (see [`DrainForRewind`]).
#[derive(Message)]
#[rtype(result = "Vec<(Assignment, Option<i64>)>")]
pub struct ReleaseForRewind {
    pub assignments: Vec<Assignment>,
}

/// The checkpoint forgets these assignments; the reply holds the positions still to commit.
#[derive(Message)]
#[rtype(result = "Vec<CommitPosition>")]
pub struct ReleasePartitions {
    pub assignments: Vec<Assignment>,
}

/// The results of one offset commit, per position (`None`: committed).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct CommitCompleted {
    pub results: Vec<(CommitPosition, Option<String>)>,
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
#[rtype(result = "Option<super::status::Overview>")]
pub struct GetOverview;

/// The whole service's snapshot (the supervisor asks the others).
#[derive(Message)]
#[rtype(result = "ServiceStatus")]
pub struct GetStatus;

/// An operator action on one partition.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
        self.into()
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

/// An operator dead-letters one Unknown record of a partition instead of retrying it (a skip):
/// it is stored in `dead_letters` (reason `skipped_by_operator`) as the partition's next unit
/// of work, and the watermark moves past it. Accepted, the answer is a [`SkipTicket`] that
/// tells what became of it.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<SkipTicket, SkipRefused>")]
pub struct DeadLetterRecord {
    pub partition: i32,
    pub offset: i64,
    /// Why, in the operator's words (required).
    pub comment: String,
    /// Who, as the audit trail names them.
    pub by: String,
}

/// What became of an operator's skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipOutcome {
    /// The record's dead letter was stored (`skipped_by_operator`).
    Done,
    /// A retry already running resolved the record first, with this outcome: nothing was
    /// dead-lettered by the skip.
    Overtaken(Outcome),
    /// The partition was revoked (or rewound, or the service stopped) before the skip ran:
    /// nothing was dead-lettered, and the record is its next owner's.
    Dropped,
}

impl SkipOutcome {
    /// The word the audit trail records.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipOutcome::Done => "done",
            SkipOutcome::Overtaken(_) => "overtaken",
            SkipOutcome::Dropped => "dropped",
        }
    }

    /// What the operator is told.
    pub fn message(self) -> String {
        match self {
            SkipOutcome::Done => "dead-lettered: stored in dead_letters as skipped_by_operator; \
                 the committed offset moves past it"
                .to_owned(),
            SkipOutcome::Overtaken(Outcome::Applied) => {
                "not dead-lettered: a retry stored it first (applied)".to_owned()
            }
            SkipOutcome::Overtaken(Outcome::AlreadyApplied) => {
                "not dead-lettered: a retry found it stored already (already_applied)".to_owned()
            }
            SkipOutcome::Overtaken(outcome) => {
                format!("not dead-lettered: a retry resolved it first ({outcome})")
            }
            SkipOutcome::Dropped => "not dead-lettered: the partition was revoked (or rewound) \
                 before the skip ran; its next owner retries the record"
                .to_owned(),
        }
    }
}

/// The outcome of an accepted skip, once known. Dropped unanswered (the partition's actor
/// stopped before the skip ran) it is [`SkipOutcome::Dropped`].
#[derive(Debug)]
pub struct SkipTicket(oneshot::Receiver<SkipOutcome>);

impl SkipTicket {
    /// A ticket, and the sender its outcome goes through.
    pub fn new() -> (oneshot::Sender<SkipOutcome>, SkipTicket) {
        let (tell, told) = oneshot::channel();
        (tell, SkipTicket(told))
    }
}

impl std::future::Future for SkipTicket {
    type Output = SkipOutcome;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<SkipOutcome> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|told| told.unwrap_or(SkipOutcome::Dropped))
    }
}

/// Why a record cannot be dead-lettered by an operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipRefused {
    #[error(transparent)]
    NotOwned(#[from] NotOwned),
    #[error(
        "offset {offset} is not in the Unknown backlog of partition {partition} (resolved \
         already, not delivered yet, or the partition is being revoked)"
    )]
    NotInBacklog { partition: i32, offset: i64 },
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_outcome_says_what_became_of_the_record_in_a_word_and_a_sentence() {
        let cases = [
            (
                SkipOutcome::Done,
                "done",
                "dead-lettered: stored in dead_letters",
            ),
            (
                SkipOutcome::Overtaken(Outcome::Applied),
                "overtaken",
                "not dead-lettered: a retry stored it first",
            ),
            (
                SkipOutcome::Overtaken(Outcome::DeadLettered),
                "overtaken",
                "not dead-lettered: a retry resolved it first (dead_lettered)",
            ),
            (
                SkipOutcome::Dropped,
                "dropped",
                "not dead-lettered: the partition was revoked",
            ),
        ];
        for (outcome, word, sentence) in cases {
            assert_eq!(outcome.as_str(), word);
            assert!(
                outcome.message().starts_with(sentence),
                "{}",
                outcome.message()
            );
        }
    }

    #[tokio::test]
    async fn a_skip_whose_partition_stopped_before_answering_was_dropped() {
        let (tell, ticket) = SkipTicket::new();
        drop(tell);
        assert_eq!(ticket.await, SkipOutcome::Dropped);
    }
}
