//! The checkpoint actor: one [`Watermark`] per assigned partition, fed by the partition
//! actors' outcomes, committed to Kafka periodically when it moved, and handed over as the
//! final position when a partition is revoked. Commit failures are counted and retried on the
//! next tick, never fatal.

use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::time::Duration;

use actix::prelude::*;

use super::messages::{
    BacklogResolved, CommitCompleted, CommitTick, GapObserved, GetCheckpointStatus,
    OutcomeReported, ReleasePartitions, TrackPartitions,
};
use super::status::CheckpointStatus;
use crate::kafka::DriverCommand;
use crate::metrics::Metrics;
use crate::watermark::Watermark;

#[derive(Default)]
struct Tracked {
    watermark: Watermark,
    committed: Option<i64>,
    in_flight: Option<i64>,
    commits_ok: u64,
    commits_failed: u64,
    last_commit_error: Option<String>,
}

/// Keeps the watermarks and commits them through the Kafka driver thread.
pub struct Checkpoint {
    partitions: BTreeMap<i32, Tracked>,
    driver: Sender<DriverCommand>,
    interval: Duration,
    metrics: Metrics,
}

impl Checkpoint {
    pub fn new(driver: Sender<DriverCommand>, interval: Duration, metrics: Metrics) -> Self {
        Checkpoint {
            partitions: BTreeMap::new(),
            driver,
            interval,
            metrics,
        }
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
        for partition in msg.partitions {
            self.partitions.insert(partition, Tracked::default());
        }
    }
}

impl Handler<OutcomeReported> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: OutcomeReported, _ctx: &mut Context<Self>) {
        if let Some(tracked) = self.partitions.get_mut(&msg.partition) {
            tracked.watermark.report(msg.offset, msg.resolved);
            self.publish(msg.partition);
        }
    }
}

impl Handler<BacklogResolved> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: BacklogResolved, _ctx: &mut Context<Self>) {
        if let Some(tracked) = self.partitions.get_mut(&msg.partition) {
            tracked.watermark.resolve(msg.offset);
            self.publish(msg.partition);
        }
    }
}

impl Handler<GapObserved> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: GapObserved, _ctx: &mut Context<Self>) {
        if let Some(tracked) = self.partitions.get_mut(&msg.partition) {
            if tracked.watermark.skip_gap(msg.last_delivered, msg.position) {
                self.publish(msg.partition);
            }
        }
    }
}

impl Handler<CommitTick> for Checkpoint {
    type Result = ();

    fn handle(&mut self, _: CommitTick, _ctx: &mut Context<Self>) {
        let mut offsets = Vec::new();
        for (partition, tracked) in &mut self.partitions {
            let Some(position) = tracked.watermark.position() else {
                continue;
            };
            let moved = tracked
                .committed
                .is_none_or(|committed| position > committed);
            // One commit per partition at a time; a lost callback is retried on the next tick.
            if moved && tracked.in_flight != Some(position) {
                tracked.in_flight = Some(position);
                offsets.push((*partition, position));
            } else if moved {
                tracked.in_flight = None;
            }
        }
        if !offsets.is_empty() && self.driver.send(DriverCommand::Commit(offsets)).is_err() {
            tracing::debug!("kafka driver gone; commit skipped");
        }
    }
}

impl Handler<CommitCompleted> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: CommitCompleted, _ctx: &mut Context<Self>) {
        self.metrics.observe_commit(msg.error.is_none());
        for (partition, offset) in msg.offsets {
            let Some(tracked) = self.partitions.get_mut(&partition) else {
                continue;
            };
            if tracked.in_flight == Some(offset) {
                tracked.in_flight = None;
            }
            match &msg.error {
                None => {
                    tracked.commits_ok += 1;
                    if tracked.committed.is_none_or(|c| offset > c) {
                        tracked.committed = Some(offset);
                    }
                }
                Some(error) => {
                    tracked.commits_failed += 1;
                    tracked.last_commit_error = Some(error.clone());
                    tracing::warn!(partition, offset, error = %error, "offset commit failed; will retry");
                }
            }
            self.publish(partition);
        }
    }
}

impl Handler<ReleasePartitions> for Checkpoint {
    type Result = MessageResult<ReleasePartitions>;

    fn handle(&mut self, msg: ReleasePartitions, _ctx: &mut Context<Self>) -> Self::Result {
        let mut finals = Vec::new();
        for partition in msg.partitions {
            if let Some(tracked) = self.partitions.remove(&partition) {
                if let Some(position) = tracked.watermark.position() {
                    if tracked.committed.is_none_or(|c| position > c) {
                        finals.push((partition, position));
                    }
                }
            }
        }
        MessageResult(finals)
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
