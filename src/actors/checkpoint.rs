//! The checkpoint actor: one [`Watermark`] per assigned partition, fed by the partition
//! actors' outcomes, committed to Kafka periodically when it moved, and handed over as the
//! final position when a partition is revoked. Commit failures are counted and retried on the
//! next tick, never fatal. Messages of an earlier assignment of a partition are ignored.
//!
//! A partition that keeps up with its log (nothing unresolved, less than a full batch queued
//! when a unit of work ends) does not wait for the next tick: its watermark is committed at
//! once, or, when a commit was sent less than a tenth of the interval (at most
//! [`EARLY_COMMIT_GAP`]) ago, once that gap has passed ([`EarlyCommits`]). So a record of a
//! partition that keeps up is committed within milliseconds of its transaction instead of up to
//! an interval later, early commits cost at most ten a second, and a partition behind its log,
//! which has a full batch waiting whenever a unit ends, commits on the ticks alone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::messages::{
    Assignment, BacklogResolved, CommitCompleted, CommitPosition, CommitTick, GetCheckpointStatus,
    KafkaLink, KafkaRequest, OutcomesReported, PartitionKeepingUp, ReleaseForRewind,
    ReleasePartitions, SkipReported, TrackPartitions,
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

/// The longest gap kept between a commit and an early one (see the module docs).
pub const EARLY_COMMIT_GAP: Duration = Duration::from_millis(100);

/// The least gap between a commit and an early one at commit interval `interval`: a tenth of
/// it, at most [`EARLY_COMMIT_GAP`].
pub fn early_commit_gap(interval: Duration) -> Duration {
    (interval / 10).min(EARLY_COMMIT_GAP)
}

/// When watermarks may be committed between ticks because a partition keeps up: at once,
/// unless a commit was sent less than `min_gap` ago, then once `min_gap` has passed since it
/// (one such wait at a time). Pure: the actor asks it and keeps the time.
#[derive(Debug)]
struct EarlyCommits {
    min_gap: Duration,
    last_sent: Option<Instant>,
    waiting: bool,
}

impl EarlyCommits {
    fn new(interval: Duration) -> EarlyCommits {
        EarlyCommits {
            min_gap: early_commit_gap(interval),
            last_sent: None,
            waiting: false,
        }
    }

    /// A commit was sent at `at`.
    fn sent(&mut self, at: Instant) {
        self.last_sent = Some(at);
    }

    /// A partition that keeps up reported outcomes at `now`: commit after the returned wait
    /// (zero: now), or `None` when a wait is already under way (its commit covers this
    /// partition too).
    fn asked(&mut self, now: Instant) -> Option<Duration> {
        if self.waiting {
            return None;
        }
        let wait = self.last_sent.map_or(Duration::ZERO, |last| {
            (last + self.min_gap).saturating_duration_since(now)
        });
        self.waiting = !wait.is_zero();
        Some(wait)
    }

    /// The wait [`EarlyCommits::asked`] asked for is over.
    fn waited(&mut self) {
        self.waiting = false;
    }
}

/// Keeps the watermarks and commits them through the Kafka driver thread.
pub struct Checkpoint {
    partitions: BTreeMap<i32, Tracked>,
    kafka: KafkaLink,
    interval: Duration,
    early: EarlyCommits,
    metrics: Metrics,
}

impl Checkpoint {
    pub fn new(kafka: KafkaLink, interval: Duration, metrics: Metrics) -> Self {
        Checkpoint {
            partitions: BTreeMap::new(),
            kafka,
            interval,
            early: EarlyCommits::new(interval),
            metrics,
        }
    }

    /// Hands the driver every watermark that moved past its last commit and is not in flight.
    fn commit_moved(&mut self) {
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
        if positions.is_empty() {
            return;
        }
        self.early.sent(Instant::now());
        if !self.kafka.send(KafkaRequest::Commit(positions)) {
            tracing::debug!("kafka driver gone; commit skipped");
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
        self.commit_moved();
    }
}

impl Handler<PartitionKeepingUp> for Checkpoint {
    type Result = ();

    fn handle(&mut self, msg: PartitionKeepingUp, ctx: &mut Context<Self>) {
        if self
            .tracked(msg.assignment)
            .is_none_or(|tracked| tracked.uncommitted().is_none())
        {
            return;
        }
        match self.early.asked(Instant::now()) {
            Some(wait) if wait.is_zero() => self.commit_moved(),
            Some(wait) => {
                ctx.run_later(wait, |checkpoint, _| {
                    checkpoint.early.waited();
                    checkpoint.commit_moved();
                });
            }
            None => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(1);
    const GAP: Duration = Duration::from_millis(100);

    #[test]
    fn the_gap_is_a_tenth_of_the_interval_and_at_most_a_tenth_of_a_second() {
        let gap = |interval| EarlyCommits::new(interval).min_gap;
        assert_eq!(gap(Duration::from_millis(100)), Duration::from_millis(10));
        assert_eq!(gap(INTERVAL), GAP);
        assert_eq!(gap(Duration::from_secs(3600)), EARLY_COMMIT_GAP);
    }

    #[test]
    fn a_partition_keeping_up_is_committed_at_once_when_nothing_was_sent_lately() {
        let mut early = EarlyCommits::new(INTERVAL);
        let t0 = Instant::now();
        assert_eq!(early.asked(t0), Some(Duration::ZERO));
        early.sent(t0);
        assert_eq!(early.asked(t0 + GAP), Some(Duration::ZERO));
        assert_eq!(early.asked(t0 + 5 * GAP), Some(Duration::ZERO));
    }

    #[test]
    fn within_a_tenth_of_the_interval_of_a_commit_the_next_waits_for_the_rest_of_it() {
        let mut early = EarlyCommits::new(INTERVAL);
        let t0 = Instant::now();
        early.sent(t0);
        let wait = Duration::from_millis(70);
        assert_eq!(early.asked(t0 + Duration::from_millis(30)), Some(wait));
        // One wait at a time: its commit covers every partition that asked meanwhile.
        assert_eq!(early.asked(t0 + Duration::from_millis(50)), None);
        early.waited();
        early.sent(t0 + GAP);
        assert_eq!(
            early.asked(t0 + GAP + Duration::from_millis(1)),
            Some(GAP - Duration::from_millis(1))
        );
    }

    proptest::proptest! {
        #[test]
        fn early_commits_are_never_closer_than_a_tenth_of_the_interval(
            asks in proptest::collection::vec(0u64..300, 1..60),
        ) {
            // Partitions keeping up ask at these gaps (ms); a commit goes out when `asked`
            // says so, at once or after its wait; the ticks are left out.
            let mut early = EarlyCommits::new(INTERVAL);
            let t0 = Instant::now();
            let (mut now, mut sent): (Instant, Vec<Instant>) = (t0, Vec::new());
            let mut pending: Option<Instant> = None;
            for gap in asks {
                now += Duration::from_millis(gap);
                if let Some(at) = pending.filter(|at| *at <= now) {
                    early.waited();
                    early.sent(at);
                    sent.push(at);
                    pending = None;
                }
                match early.asked(now) {
                    Some(wait) if wait.is_zero() => {
                        early.sent(now);
                        sent.push(now);
                    }
                    Some(wait) => pending = Some(now + wait),
                    None => proptest::prop_assert!(pending.is_some()),
                }
            }
            for pair in sent.windows(2) {
                proptest::prop_assert!(pair[1] - pair[0] >= GAP);
            }
        }
    }
}
