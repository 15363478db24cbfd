//! The actors among themselves: a partition actor's outcomes to the checkpoint, the
//! checkpoint's bookkeeping of assignments, its commit tick, and stopping.

use std::time::Instant;

use actix::prelude::*;

use crate::domain::{Assignment, CommitPosition};

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

/// Offsets without records were skipped (see [`Fetched::Skipped`](super::driver::Fetched::Skipped)), reported by the partition
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
/// must resume for each (see [`DrainForRewind`](super::driver::DrainForRewind)).
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

/// Time for the checkpoint to commit the watermarks that moved.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CommitTick;

/// A partition that keeps up with its log (nothing unresolved, less than a full batch queued)
/// reported outcomes: its watermark may be committed before the next tick.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionKeepingUp {
    pub assignment: Assignment,
}

/// Stop taking records, finish the transaction in flight, then reply (at the latest at
/// `deadline`). The actor stops after replying.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain {
    pub deadline: Instant,
}

/// Leave the group gracefully: drain, commit, stop.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;
