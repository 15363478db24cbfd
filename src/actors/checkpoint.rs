//! The checkpoint actor: one [`Watermark`] per assigned partition, fed by the partition
//! actors' outcomes, committed to Kafka periodically when it moved, and handed over as the
//! final position when a partition is revoked. Commit failures are counted and retried on the
//! next tick, never fatal. Messages of an earlier assignment of a partition are ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::prelude::*;

use super::messages::{
    Assignment, BacklogResolved, CommitCompleted, CommitPosition, CommitTick, GetCheckpointStatus,
    KafkaLink, KafkaRequest, OutcomesReported, ReleaseForRewind, ReleasePartitions, SkipReported,
    TrackPartitions,
};
use super::status::CheckpointStatus;
use crate::metrics::Metrics;
use crate::watermark::Watermark;

struct Tracked {
    generation: u64,
    watermark: Watermark,
    committed: Option<i64>,
    /// The position handed to the driver and not yet reported back.
    in_flight: Option<i64>,
    commits_ok: u64,
    commits_failed: u64,
    last_commit_error: Option<String>,
}

impl Tracked {
    fn new(generation: u64) -> Self {
        Tracked {
            generation,
            watermark: Watermark::new(),
            committed: None,
            in_flight: None,
            commits_ok: 0,
            commits_failed: 0,
            last_commit_error: None,
        }
    }

    /// The watermark's position when it is ahead of what was committed.
    fn uncommitted(&self) -> Option<i64> {
        let position = self.watermark.position()?;
        self.committed
            .is_none_or(|committed| position > committed)
            .then_some(position)
    }
}

/// Keeps the watermarks and commits them through the Kafka driver thread.
pub struct Checkpoint {
    partitions: BTreeMap<i32, Tracked>,
    kafka: KafkaLink,
    interval: Duration,
    metrics: Metrics,
}

impl Checkpoint {
    pub fn new(kafka: KafkaLink, interval: Duration, metrics: Metrics) -> Self {
        Checkpoint {
            partitions: BTreeMap::new(),
            kafka,
            interval,
            metrics,
        }
    }

    /// The tracked state of exactly this assignment (an earlier one's messages are ignored).
    /// Stops tracking those of `assignments` that are current; what was tracked of each.
    fn release(&mut self, assignments: Vec<Assignment>) -> Vec<(Assignment, Tracked)> {
        let mut released = Vec::new();
        for assignment in assignments {
            if self.tracked(assignment).is_none() {
                continue;
            }
            if let Some(tracked) = self.partitions.remove(&assignment.partition) {
                released.push((assignment, tracked));
            }
        }
        released
    }

    fn tracked(&mut self, assignment: Assignment) -> Option<&mut Tracked> {
        self.partitions
            .get_mut(&assignment.partition)
            .filter(|t| t.generation == assignment.generation)
    }

    fn publish(&self, partition: i32) {
        if let Some(tracked) = self.partitions.get(&partition) {
            self.metrics
                .set_watermark(partition, tracked.watermark.position(), tracked.committed);
        }
    }
}

impl Actor for Checkpoint {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.interval, |_, ctx| ctx.notify(CommitTick));
    }
}

impl Handler<TrackPartitions> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: TrackPartitions, _ctx: &mut Context<Self>) {
        for assignment in msg.assignments {
            self.partitions
                .insert(assignment.partition, Tracked::new(assignment.generation));
        }
    }
}

impl Handler<OutcomesReported> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: OutcomesReported, _ctx: &mut Context<Self>) {
        if let Some(tracked) = self.tracked(msg.assignment) {
            for (offset, resolved) in msg.outcomes {
                tracked.watermark.report(offset, resolved);
            }
            self.publish(msg.assignment.partition);
        }
    }
}

impl Handler<BacklogResolved> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: BacklogResolved, _ctx: &mut Context<Self>) {
        if let Some(tracked) = self.tracked(msg.assignment) {
            tracked.watermark.resolve(msg.offset);
            self.publish(msg.assignment.partition);
        }
    }
}

impl Handler<SkipReported> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: SkipReported, _ctx: &mut Context<Self>) {
        if let Some(tracked) = self.tracked(msg.assignment) {
            if tracked.watermark.skip_gap(msg.after, msg.position) {
                self.publish(msg.assignment.partition);
            }
        }
    }
}

impl Handler<CommitTick> for Checkpoint {
    type Result = ();

    fn handle(&mut self, _: CommitTick, _ctx: &mut Context<Self>) {
        let mut positions = Vec::new();
        for (partition, tracked) in &mut self.partitions {
            let Some(position) = tracked.uncommitted() else {
                continue;
            };
            // The driver keeps one commit in flight and merges what queues behind it, so a
            // position already handed over is not sent again until it is reported back.
            if tracked.in_flight != Some(position) {
                tracked.in_flight = Some(position);
                positions.push(CommitPosition {
                    assignment: Assignment {
                        partition: *partition,
                        generation: tracked.generation,
                    },
                    offset: position,
                });
            }
        }
        if !positions.is_empty() && !self.kafka.send(KafkaRequest::Commit(positions)) {
            tracing::debug!("kafka driver gone; commit skipped");
        }
    }
}

impl Handler<CommitCompleted> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: CommitCompleted, _ctx: &mut Context<Self>) {
        for (position, error) in msg.results {
            self.metrics.observe_commit(error.is_none());
            let Some(tracked) = self.tracked(position.assignment) else {
                continue;
            };
            if tracked.in_flight.is_some_and(|o| o <= position.offset) || error.is_some() {
                tracked.in_flight = None;
            }
            match error {
                None => {
                    tracked.commits_ok += 1;
                    if tracked.committed.is_none_or(|c| position.offset > c) {
                        tracked.committed = Some(position.offset);
                    }
                }
                Some(error) => {
                    tracked.commits_failed += 1;
                    tracing::warn!(
                        partition = position.assignment.partition,
                        offset = position.offset,
                        error = %error,
                        "offset commit failed; will retry"
                    );
                    tracked.last_commit_error = Some(error);
                }
            }
            self.publish(position.assignment.partition);
        }
    }
}

impl Handler<ReleasePartitions> for Checkpoint {
    type Result = MessageResult<ReleasePartitions>;

    fn handle(&mut self, msg: ReleasePartitions, _ctx: &mut Context<Self>) -> Self::Result {
        let finals = self
            .release(msg.assignments)
            .into_iter()
            .filter_map(|(assignment, tracked)| {
                let offset = tracked.uncommitted()?;
                Some(CommitPosition { assignment, offset })
            })
            .collect();
        MessageResult(finals)
    }
}

impl Handler<ReleaseForRewind> for Checkpoint {
    type Result = MessageResult<ReleaseForRewind>;

    fn handle(&mut self, msg: ReleaseForRewind, _ctx: &mut Context<Self>) -> Self::Result {
        let resumes = self
            .release(msg.assignments)
            .into_iter()
            .map(|(assignment, tracked)| (assignment, tracked.watermark.resume_at()))
            .collect();
        MessageResult(resumes)
    }
}

impl Handler<GetCheckpointStatus> for Checkpoint {
    type Result = MessageResult<GetCheckpointStatus>;

    fn handle(&mut self, _: GetCheckpointStatus, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.partitions
                .iter()
                .map(|(partition, t)| CheckpointStatus {
                    partition: *partition,
                    generation: t.generation,
                    watermark: t.watermark.position(),
                    committed: t.committed,
                    unresolved: t.watermark.unresolved_count(),
                    first_unresolved: t.watermark.first_unresolved(),
                    commits_ok: t.commits_ok,
                    commits_failed: t.commits_failed,
                    last_commit_error: t.last_commit_error.clone(),
                })
                .collect(),
        )
    }
}
