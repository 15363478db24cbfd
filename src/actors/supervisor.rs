//! The supervisor: follows the group's assignment. On assignment it starts one partition actor
//! per partition and tells the driver thread where to deliver their records; on revocation it
//! drains them and returns the final watermarks for the driver to commit before the partitions
//! go elsewhere. It remembers which partitions an operator paused, so that a pause survives
//! the partition being revoked and assigned back to this instance.
//!
//! A live rewind goes the same way without a rebalance: the supervisor hands it to the driver
//! thread, which has it drain the partitions' actors ([`DrainForRewind`]), seeks, and has it
//! start fresh ones for new assignments ([`PartitionsRestarted`]) before it answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures::future::join_all;

use super::checkpoint::Checkpoint;
use super::messages::{
    ApplyAction, Assignment, CommitPosition, DeadLetterRecord, Drain, DrainForRewind,
    DriverStopped, FetchTrouble, Fetched, GetCheckpointStatus, GetPartitionStatus, GetStatus,
    GroupJoined, KafkaLink, KafkaRequest, LiveRewound, NotOwned, OffsetResetFound,
    OffsetResetResumed, OffsetsObserved, PartitionAction, PartitionCommand, PartitionsAssigned,
    PartitionsRestarted, PartitionsRevoked, PartitionsRewound, ReleaseForRewind, ReleasePartitions,
    RewindPartitions, RewindTarget, SampleStatus, Shutdown, SkipRefused, SkipTicket,
    TrackPartitions,
};
use super::partition::{PartitionActor, PartitionDeps};
use super::status::{BacklogDetail, PartitionView, ServiceStatus};
use crate::domain::{HeldCause, ObservedOffsets, Trouble};
use crate::inbox::offset_resets;

/// Identity of this member, for the status page.
#[derive(Debug, Clone)]
pub struct MemberInfo {
    pub group: String,
    pub topic: String,
    pub host: String,
}

/// Owns the partition actors of this instance.
pub struct Supervisor {
    info: MemberInfo,
    member_id: Option<String>,
    started_at: DateTime<Utc>,
    deps: Arc<PartitionDeps>,
    checkpoint: Addr<Checkpoint>,
    kafka: KafkaLink,
    drain_timeout: Duration,
    partitions: BTreeMap<i32, (Assignment, Addr<PartitionActor>)>,
    /// Partitions an operator paused on this instance, assigned here or not.
    paused: BTreeSet<i32>,
    observed: BTreeMap<i32, ObservedOffsets>,
    /// What reading each assignment's partition ran into, as the driver thread reported it.
    fetch: BTreeMap<i32, (Assignment, Trouble)>,
    /// Live rewinds handed to the driver thread, by id, and who waits for each.
    rewinds: HashMap<u64, tokio::sync::oneshot::Sender<Vec<LiveRewound>>>,
    next_rewind: u64,
    shutting_down: bool,
    /// Told when the driver thread has stopped (the service is done).
    on_stopped: Option<tokio::sync::oneshot::Sender<Option<String>>>,
}

impl Supervisor {
    pub fn new(
        info: MemberInfo,
        deps: Arc<PartitionDeps>,
        drain_timeout: Duration,
        on_stopped: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> Self {
        Supervisor {
            info,
            member_id: None,
            started_at: Utc::now(),
            checkpoint: deps.checkpoint.clone(),
            kafka: deps.kafka.clone(),
            deps,
            drain_timeout,
            partitions: BTreeMap::new(),
            paused: BTreeSet::new(),
            observed: BTreeMap::new(),
            fetch: BTreeMap::new(),
            rewinds: HashMap::new(),
            next_rewind: 1,
            shutting_down: false,
            on_stopped: Some(on_stopped),
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;
}

impl Supervisor {
    /// Starts an actor per assignment (the checkpoint tracks them first); where to deliver.
    fn start_actors(
        &mut self,
        assignments: Vec<Assignment>,
    ) -> Vec<(Assignment, Recipient<Fetched>)> {
        // The checkpoint tracks them before any actor can report an outcome.
        self.checkpoint.do_send(TrackPartitions {
            assignments: assignments.clone(),
        });
        let mut sinks: Vec<(Assignment, Recipient<Fetched>)> = Vec::new();
        for assignment in assignments {
            self.deps.metrics.init_offset_resets(assignment.partition);
            let paused = self.paused.contains(&assignment.partition);
            let actor = PartitionActor::new(assignment, self.deps.clone(), paused).start();
            sinks.push((assignment, actor.clone().recipient()));
            self.partitions
                .insert(assignment.partition, (assignment, actor));
        }
        sinks
    }

    /// Takes the actors of exactly these assignments out of the map.
    /// Takes the actors of `assignments` and has them drain, each within the drain timeout;
    /// the future ends when all of them did.
    fn drain(
        &mut self,
        assignments: &[Assignment],
    ) -> impl std::future::Future<Output = ()> + use<> {
        let deadline = Instant::now() + self.drain_timeout;
        let actors = self.take_actors(assignments);
        async move {
            join_all(actors.iter().map(|actor| actor.send(Drain { deadline }))).await;
        }
    }

    fn take_actors(&mut self, assignments: &[Assignment]) -> Vec<Addr<PartitionActor>> {
        let mut actors = Vec::new();
        for assignment in assignments {
            if self
                .fetch
                .get(&assignment.partition)
                .is_some_and(|(held, _)| held == assignment)
            {
                self.fetch.remove(&assignment.partition);
                self.deps
                    .metrics
                    .set_offset_reset_held(assignment.partition, false);
            }
            if self
                .partitions
                .get(&assignment.partition)
                .is_some_and(|(held, _)| held == assignment)
            {
                if let Some((_, actor)) = self.partitions.remove(&assignment.partition) {
                    actors.push(actor);
                }
            }
        }
        actors
    }
}

impl Handler<PartitionsAssigned> for Supervisor {
    type Result = MessageResult<PartitionsAssigned>;

    fn handle(&mut self, msg: PartitionsAssigned, _ctx: &mut Context<Self>) -> Self::Result {
        self.deps.metrics.observe_rebalance("assign");
        MessageResult(self.start_actors(msg.assignments))
    }
}

impl Handler<PartitionsRestarted> for Supervisor {
    type Result = MessageResult<PartitionsRestarted>;

    fn handle(&mut self, msg: PartitionsRestarted, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.start_actors(msg.assignments))
    }
}

impl Handler<RewindPartitions> for Supervisor {
    type Result = ResponseFuture<Result<Vec<LiveRewound>, NotOwned>>;

    fn handle(&mut self, msg: RewindPartitions, _ctx: &mut Context<Self>) -> Self::Result {
        let mut targets = Vec::new();
        for (partition, target) in msg.targets {
            match self.partitions.get(&partition) {
                Some((assignment, _)) => targets.push(RewindTarget {
                    assignment: *assignment,
                    target,
                }),
                None => return Box::pin(async move { Err(NotOwned(partition)) }),
            }
        }
        let id = self.next_rewind;
        self.next_rewind += 1;
        let (tell, told) = tokio::sync::oneshot::channel();
        let failed = |targets: &[RewindTarget], why: &str| -> Vec<LiveRewound> {
            targets
                .iter()
                .map(|t| LiveRewound::failed(t.assignment.partition, why))
                .collect()
        };
        if self.shutting_down {
            let results = failed(&targets, "the service is shutting down");
            return Box::pin(async move { Ok(results) });
        }
        let partitions: Vec<i32> = targets.iter().map(|t| t.assignment.partition).collect();
        tracing::info!(id, ?partitions, "live rewind requested");
        self.rewinds.insert(id, tell);
        let lost = failed(&targets, "the kafka driver did not answer");
        if !self.kafka.send(KafkaRequest::Rewind { id, targets }) {
            self.rewinds.remove(&id);
        }
        Box::pin(async move { Ok(told.await.unwrap_or(lost)) })
    }
}

impl Handler<DrainForRewind> for Supervisor {
    type Result = ResponseFuture<Vec<(Assignment, Option<i64>)>>;

    fn handle(&mut self, msg: DrainForRewind, _ctx: &mut Context<Self>) -> Self::Result {
        let drained = self.drain(&msg.assignments);
        let checkpoint = self.checkpoint.clone();
        let assignments = msg.assignments;
        Box::pin(async move {
            drained.await;
            checkpoint
                .send(ReleaseForRewind { assignments })
                .await
                .unwrap_or_default()
        })
    }
}

impl Handler<PartitionsRewound> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: PartitionsRewound, _ctx: &mut Context<Self>) {
        tracing::info!(id = msg.id, results = ?msg.results, "live rewind done");
        if let Some(tell) = self.rewinds.remove(&msg.id) {
            let _ = tell.send(msg.results);
        }
    }
}

impl Handler<PartitionsRevoked> for Supervisor {
    type Result = ResponseFuture<Vec<CommitPosition>>;

    fn handle(&mut self, msg: PartitionsRevoked, _ctx: &mut Context<Self>) -> Self::Result {
        let kind = if msg.lost { "lost" } else { "revoke" };
        self.deps.metrics.observe_rebalance(kind);
        for assignment in &msg.assignments {
            self.observed.remove(&assignment.partition);
        }
        let drained = self.drain(&msg.assignments);
        let checkpoint = self.checkpoint.clone();
        let assignments = msg.assignments;
        Box::pin(async move {
            drained.await;
            let finals = checkpoint
                .send(ReleasePartitions { assignments })
                .await
                .unwrap_or_default();
            tracing::info!(?finals, "partitions drained");
            finals
        })
    }
}

impl Handler<OffsetsObserved> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: OffsetsObserved, _ctx: &mut Context<Self>) {
        for offsets in msg.partitions {
            if self.partitions.contains_key(&offsets.partition) {
                self.deps.metrics.set_observed(&offsets);
                self.observed.insert(offsets.partition, offsets);
            }
        }
    }
}

impl Handler<FetchTrouble> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: FetchTrouble, _ctx: &mut Context<Self>) {
        let partition = msg.assignment.partition;
        let current = self
            .partitions
            .get(&partition)
            .is_some_and(|(assignment, _)| *assignment == msg.assignment);
        match msg.trouble {
            Some(trouble) if current => {
                let at_reset = matches!(
                    &trouble,
                    Trouble::Held(held) if matches!(held.cause, HeldCause::OffsetOutOfRange { .. })
                );
                self.deps.metrics.set_offset_reset_held(partition, at_reset);
                self.fetch.insert(partition, (msg.assignment, trouble));
            }
            Some(_) => {}
            None => {
                if self
                    .fetch
                    .get(&partition)
                    .is_some_and(|(assignment, _)| *assignment == msg.assignment)
                {
                    self.fetch.remove(&partition);
                    self.deps.metrics.set_offset_reset_held(partition, false);
                }
            }
        }
    }
}

/// How long recording an offset reset waits before trying again while the database fails.
const RESET_RECORD_RETRY: Duration = Duration::from_secs(1);

impl Handler<OffsetResetFound> for Supervisor {
    type Result = ();

    /// Records the gap (until the database takes it), and only then lets the partition read on
    /// past it when the policy says so.
    fn handle(&mut self, msg: OffsetResetFound, _ctx: &mut Context<Self>) {
        let OffsetResetFound { assignment, reset } = msg;
        let partition = assignment.partition;
        self.deps
            .metrics
            .observe_offset_reset(partition, reset.policy.as_str());
        let pool = self.deps.pool.clone();
        let kafka = self.kafka.clone();
        let metrics = self.deps.metrics.clone();
        actix::spawn(async move {
            let mut failing = false;
            while let Err(error) = offset_resets::record(&pool, &reset).await {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        partition,
                        from = reset.from_offset,
                        error = %crate::error_text::chain(&error),
                        "offset reset not recorded yet; the partition stays held until it is"
                    );
                }
                tokio::time::sleep(RESET_RECORD_RETRY).await;
            }
            tracing::warn!(
                partition,
                from = reset.from_offset,
                to = reset.to_offset,
                log_start = reset.log_start,
                log_end = reset.log_end,
                policy = reset.policy.as_str(),
                reason = %reset.reason,
                "offset reset recorded in offset_resets"
            );
            if let Some(at) = reset.to_offset {
                metrics.observe_offset_reset_gap(partition, reset.skipped().unsigned_abs());
                kafka.send(KafkaRequest::ResumeAfterReset {
                    assignment,
                    from: reset.from_offset,
                    at,
                });
            }
        });
    }
}

impl Handler<OffsetResetResumed> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: OffsetResetResumed, _ctx: &mut Context<Self>) {
        let pool = self.deps.pool.clone();
        let topic = self.info.topic.clone();
        let metrics = self.deps.metrics.clone();
        actix::spawn(async move {
            let mut failing = false;
            while let Err(error) =
                offset_resets::resume(&pool, &topic, msg.partition, msg.from, msg.to, msg.by).await
            {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        partition = msg.partition,
                        from = msg.from,
                        error = %crate::error_text::chain(&error),
                        "the end of a held offset reset is not recorded yet; retrying"
                    );
                }
                tokio::time::sleep(RESET_RECORD_RETRY).await;
            }
            metrics
                .observe_offset_reset_gap(msg.partition, (msg.to - msg.from).max(0).unsigned_abs());
        });
    }
}

impl Handler<GroupJoined> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: GroupJoined, _ctx: &mut Context<Self>) {
        self.member_id = Some(msg.member_id);
    }
}

impl Handler<GetStatus> for Supervisor {
    type Result = ResponseFuture<ServiceStatus>;

    fn handle(&mut self, _: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.status(BacklogDetail::Entries)
    }
}

impl Handler<SampleStatus> for Supervisor {
    type Result = ResponseFuture<ServiceStatus>;

    fn handle(&mut self, _: SampleStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.status(BacklogDetail::Summary)
    }
}

impl Supervisor {
    /// The service's snapshot: the partition actors' and the checkpoint's, joined.
    fn status(&self, detail: BacklogDetail) -> ResponseFuture<ServiceStatus> {
        let actors: Vec<_> = self
            .partitions
            .iter()
            .map(|(p, (_, a))| (*p, a.clone()))
            .collect();
        let checkpoint = self.checkpoint.clone();
        let observed = self.observed.clone();
        let fetch = self.fetch.clone();
        let mut status = ServiceStatus {
            group: self.info.group.clone(),
            topic: self.info.topic.clone(),
            member_id: self.member_id.clone(),
            host: self.info.host.clone(),
            started_at: self.started_at,
            shutting_down: self.shutting_down,
            partitions: Vec::new(),
        };
        Box::pin(async move {
            let snapshots = join_all(
                actors
                    .iter()
                    .map(|(_, a)| a.send(GetPartitionStatus(detail))),
            )
            .await;
            let checkpoints = checkpoint
                .send(GetCheckpointStatus)
                .await
                .unwrap_or_default();
            for ((partition, _), snapshot) in actors.iter().zip(snapshots) {
                status.partitions.push(PartitionView {
                    partition: *partition,
                    actor: snapshot.ok(),
                    checkpoint: checkpoints
                        .iter()
                        .find(|c| c.partition == *partition)
                        .cloned(),
                    observed: observed.get(partition).copied(),
                    fetch: fetch.get(partition).map(|(_, trouble)| trouble.clone()),
                });
            }
            status
        })
    }
}

impl Handler<PartitionCommand> for Supervisor {
    type Result = Result<(), NotOwned>;

    fn handle(&mut self, msg: PartitionCommand, _ctx: &mut Context<Self>) -> Self::Result {
        let (_, actor) = self
            .partitions
            .get(&msg.partition)
            .ok_or(NotOwned(msg.partition))?;
        match msg.action {
            PartitionAction::Pause => {
                self.paused.insert(msg.partition);
            }
            PartitionAction::Resume => {
                self.paused.remove(&msg.partition);
            }
            PartitionAction::RetryNow => {}
        }
        actor.do_send(ApplyAction(msg.action));
        Ok(())
    }
}

impl Handler<DeadLetterRecord> for Supervisor {
    type Result = ResponseFuture<Result<SkipTicket, SkipRefused>>;

    fn handle(&mut self, msg: DeadLetterRecord, _ctx: &mut Context<Self>) -> Self::Result {
        let partition = msg.partition;
        let actor = self.partitions.get(&partition).map(|(_, a)| a.clone());
        Box::pin(async move {
            let actor = actor.ok_or(NotOwned(partition))?;
            // An actor gone meanwhile (revoked) owns nothing any more.
            actor
                .send(msg)
                .await
                .unwrap_or(Err(NotOwned(partition).into()))
        })
    }
}

impl Handler<Shutdown> for Supervisor {
    type Result = ();

    fn handle(&mut self, _: Shutdown, _ctx: &mut Context<Self>) {
        if !self.shutting_down {
            tracing::info!("shutting down: leaving the group after draining");
            self.shutting_down = true;
            self.kafka.send(KafkaRequest::Shutdown);
        }
    }
}

impl Handler<DriverStopped> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: DriverStopped, ctx: &mut Context<Self>) {
        match &msg.error {
            None => tracing::info!("kafka consumer closed"),
            Some(error) => tracing::error!(error = %error, "kafka consumer stopped"),
        }
        if let Some(tell) = self.on_stopped.take() {
            let _ = tell.send(msg.error);
        }
        ctx.stop();
    }
}
