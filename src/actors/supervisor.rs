//! The supervisor: follows the group's assignment. On assignment it starts one partition actor
//! per partition and hands their routes to the driver thread; on revocation it drains them and
//! returns the final watermarks for the driver to commit before the partitions go elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures::future::join_all;

use super::checkpoint::Checkpoint;
use super::messages::{
    ApplyAction, Drain, DriverStopped, GetCheckpointStatus, GetPartitionStatus, GetStatus,
    GroupJoined, NotOwned, ObservedOffsets, OffsetsObserved, PartitionCommand, PartitionRoute,
    PartitionsAssigned, PartitionsRevoked, ReleasePartitions, Shutdown, TrackPartitions,
};
use super::partition::{PartitionActor, PartitionDeps};
use super::status::{PartitionView, ServiceStatus};
use crate::kafka::DriverCommand;

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
    driver: Sender<DriverCommand>,
    drain_timeout: Duration,
    partitions: BTreeMap<i32, Addr<PartitionActor>>,
    observed: BTreeMap<i32, ObservedOffsets>,
    shutting_down: bool,
    /// Told when the driver thread has stopped (the service is done).
    on_stopped: Option<tokio::sync::oneshot::Sender<Option<String>>>,
}

impl Supervisor {
    pub fn new(
        info: MemberInfo,
        deps: Arc<PartitionDeps>,
        driver: Sender<DriverCommand>,
        drain_timeout: Duration,
        on_stopped: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> Self {
        Supervisor {
            info,
            member_id: None,
            started_at: Utc::now(),
            checkpoint: deps.checkpoint.clone(),
            deps,
            driver,
            drain_timeout,
            partitions: BTreeMap::new(),
            observed: BTreeMap::new(),
            shutting_down: false,
            on_stopped: Some(on_stopped),
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;
}

impl Handler<PartitionsAssigned> for Supervisor {
    type Result = MessageResult<PartitionsAssigned>;

    fn handle(&mut self, msg: PartitionsAssigned, _ctx: &mut Context<Self>) -> Self::Result {
        tracing::info!(partitions = ?msg.partitions, "partitions assigned");
        self.deps.metrics.observe_rebalance("assign");
        let mut routes = Vec::with_capacity(msg.partitions.len());
        for &partition in &msg.partitions {
            let queued = Arc::new(AtomicUsize::new(0));
            let actor = PartitionActor::new(partition, self.deps.clone(), queued.clone()).start();
            routes.push(PartitionRoute {
                partition,
                recipient: actor.clone().recipient(),
                queued,
            });
            self.partitions.insert(partition, actor);
        }
        self.checkpoint.do_send(TrackPartitions {
            partitions: msg.partitions,
        });
        MessageResult(routes)
    }
}

impl Handler<PartitionsRevoked> for Supervisor {
    type Result = ResponseFuture<Vec<(i32, i64)>>;

    fn handle(&mut self, msg: PartitionsRevoked, _ctx: &mut Context<Self>) -> Self::Result {
        let kind = if msg.lost { "lost" } else { "revoke" };
        tracing::info!(partitions = ?msg.partitions, kind, "partitions revoked; draining");
        self.deps.metrics.observe_rebalance(kind);
        let deadline = Instant::now() + self.drain_timeout;
        let actors: Vec<_> = msg
            .partitions
            .iter()
            .filter_map(|p| self.partitions.remove(p))
            .collect();
        for partition in &msg.partitions {
            self.observed.remove(partition);
        }
        let checkpoint = self.checkpoint.clone();
        let partitions = msg.partitions;
        Box::pin(async move {
            join_all(actors.iter().map(|actor| actor.send(Drain { deadline }))).await;
            let finals = checkpoint
                .send(ReleasePartitions { partitions })
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

impl Handler<GroupJoined> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: GroupJoined, _ctx: &mut Context<Self>) {
        self.member_id = Some(msg.member_id);
    }
}

impl Handler<GetStatus> for Supervisor {
    type Result = ResponseFuture<ServiceStatus>;

    fn handle(&mut self, _: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        let actors: Vec<_> = self
            .partitions
            .iter()
            .map(|(p, a)| (*p, a.clone()))
            .collect();
        let checkpoint = self.checkpoint.clone();
        let observed = self.observed.clone();
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
            let snapshots = join_all(actors.iter().map(|(_, a)| a.send(GetPartitionStatus))).await;
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
                });
            }
            status
        })
    }
}

impl Handler<PartitionCommand> for Supervisor {
    type Result = Result<(), NotOwned>;

    fn handle(&mut self, msg: PartitionCommand, _ctx: &mut Context<Self>) -> Self::Result {
        let actor = self
            .partitions
            .get(&msg.partition)
            .ok_or(NotOwned(msg.partition))?;
        actor.do_send(ApplyAction(msg.action));
        Ok(())
    }
}

impl Handler<Shutdown> for Supervisor {
    type Result = ();

    fn handle(&mut self, _: Shutdown, _ctx: &mut Context<Self>) {
        if !self.shutting_down {
            tracing::info!("shutting down: leaving the group after draining");
            self.shutting_down = true;
            let _ = self.driver.send(DriverCommand::Shutdown);
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
